from inglenook.engine.host import main

raise SystemExit(main())
