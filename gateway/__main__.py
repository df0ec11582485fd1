"""``python -m gateway`` is the same as the ``switchboard`` command."""

from gateway.cli.main import main

raise SystemExit(main())
