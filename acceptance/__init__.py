"""wirecheck.acceptance: see DESIGN.md (not built yet)."""
