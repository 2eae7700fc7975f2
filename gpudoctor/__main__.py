"""`python -m gpudoctor` is the `gpudoctor` command."""

from gpudoctor.cli import main

raise SystemExit(main())
