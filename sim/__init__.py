"""wirecheck.sim: see DESIGN.md (not built yet)."""
