"""wirecheck.generators: see DESIGN.md (not built yet)."""
