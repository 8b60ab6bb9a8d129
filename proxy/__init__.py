"""wirecheck.proxy: see DESIGN.md (not built yet)."""
