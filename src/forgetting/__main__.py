from forgetting.cli import main

raise SystemExit(main())
