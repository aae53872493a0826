from tests.conftest import *  # noqa: F403 - the same fixtures as the suite
