from ihprobe.cli import main

raise SystemExit(main())
