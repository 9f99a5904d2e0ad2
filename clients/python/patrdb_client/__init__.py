"""Python client of patrdb serve: the HTTP API of a patrdb store, standard library only.

    from patrdb_client import Client, RolloutWorker, StepDriver, Verifier, Move, Observation
"""

from .client import (MIN_API_VERSION, BadRequest, BadResponse, Client, Conflict, Forbidden, IncompatibleServer, NotFound,
                     PatrdbError, ServerError, Unauthorized, __version__, new_client_key)
from .batch import Batch, SafetensorsError, parse_safetensors
from .rollout import (DEFAULT_LEASE_TTL_MS, ActRequest, Episode, Env, Move, Observation, RolloutWorker,
                      StepAdvantages, StepDriver, WorkerStats, drive_step, heartbeat_every)
from .verifier import Verifier, VerifierStats
from .types import *  # noqa: F401,F403
from .types import __all__ as _types_all

__all__ = ["Client", "RolloutWorker", "StepDriver", "StepAdvantages", "drive_step", "Verifier", "VerifierStats",
           "ActRequest", "Move", "Observation", "Episode", "Env", "WorkerStats", "DEFAULT_LEASE_TTL_MS",
           "heartbeat_every", "PatrdbError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
           "ServerError", "BadResponse", "IncompatibleServer", "MIN_API_VERSION", "new_client_key", "Batch", "SafetensorsError",
           "parse_safetensors"] + list(_types_all)
