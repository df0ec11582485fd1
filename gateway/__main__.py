"""``python -m gateway`` is the same as the ``switchboard`` command."""

from gateway.cli.entry import main

raise SystemExit(main())
