"""Bad input, in one class: every error that means "the input was wrong, nothing was judged" derives from it.

The command line turns it into one line, `gpudoctor: error: <message>`, and exit code 2, in one place (its
`main`); the Python API lets it through. A module that reads input keeps its own subclass (ConfigError,
SnapshotError, SelectionError, ...) so that a caller can tell what was wrong; none translates another's.
"""

from __future__ import annotations


class InputError(ValueError):
    """Bad input (an option, a file named on the command line, the config, the launcher's environment): its
    message is one line naming what was wrong and, where it can, what to do."""
