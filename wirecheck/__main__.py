from wirecheck.cli import main

raise SystemExit(main())
