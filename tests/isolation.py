"""The test run's own home and environment: no test reads the developer's ``~/.switchboard``,
keys, proxies or XDG directories, and neither does any process a test starts.

:func:`isolate` runs first in tests/conftest.py, before anything is imported that could
read settings: it points ``HOME`` at an empty directory of the run's own (removed when the
process exits) and removes the variables that would change what the gateway does. Child
processes inherit the result, and the per-test ``SWITCHBOARD_HOME`` comes on top (the
``_isolated_env`` fixture). tests/test_isolation.py runs part of the suite with a populated
``~/.switchboard`` and such variables set, and it must stay green.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import MutableMapping
from pathlib import Path

# Every variable with one of these prefixes is the developer's, not the test's: settings
# (SWITCHBOARD_LLM__MODEL, SWITCHBOARD_HOME, ...) and the XDG base and runtime directories.
SCRUBBED_PREFIXES = ("SWITCHBOARD_", "XDG_")
# The suite's own knobs, kept (README: "Run the tests").
KEPT = frozenset({"SWITCHBOARD_TEST_POSTGRES"})
SCRUBBED = frozenset(
    {
        "OPENAI_API_KEY",  # llm.api_key's fallbacks
        "ANTHROPIC_API_KEY",
        "HTTP_PROXY",  # the model SDKs and aiohttp would send loopback fakes' traffic there
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    }
)
PLAYWRIGHT_CACHE = Path(".cache", "ms-playwright")  # relative to the home (agent.web.chromium)


def scrubbed(name: str) -> bool:
    """Whether the test run removes the variable ``name`` from its environment."""
    return name not in KEPT and (name in SCRUBBED or name.startswith(SCRUBBED_PREFIXES))


def isolate(environ: MutableMapping[str, str] = os.environ) -> Path:
    """Give this process (and its children) an empty home and a clean environment; returns
    the new home."""
    real_home = Path.home()
    home = Path(tempfile.mkdtemp(prefix="switchboard-tests-home-"))
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    for name in [name for name in environ if scrubbed(name)]:
        del environ[name]
    environ["HOME"] = str(home)
    environ["NO_PROXY"] = "127.0.0.1,localhost"
    # A browser `playwright install chromium` put in the real home is a program, not
    # configuration: the browser tests still find it.
    browsers = real_home / PLAYWRIGHT_CACHE
    if "PLAYWRIGHT_BROWSERS_PATH" not in environ and browsers.is_dir():
        environ["PLAYWRIGHT_BROWSERS_PATH"] = str(browsers)
    return home
