import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

# Profiles by env var (hypothesis' own test setup): CI is derandomized, keeps no example database and
# prints the blob to reproduce a failure; "dev" explores more.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    print_blob=True,
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("WIRECHECK_HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
