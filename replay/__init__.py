"""wirecheck.replay: see DESIGN.md (not built yet)."""
