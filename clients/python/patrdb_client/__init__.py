"""Python client of patrdb serve: the HTTP API of a patrdb store, standard library only.

    from patrdb_client import Client, RolloutWorker, StepDriver, Move, Observation
"""

from .client import (MIN_API_VERSION, BadRequest, BadResponse, Client, Conflict, Forbidden, IncompatibleServer, NotFound,
                     PatrdbError, ServerError, Unauthorized, __version__, new_client_key)
from .batch import Batch, SafetensorsError, parse_safetensors
from .rollout import (ActRequest, Episode, Env, Move, Observation, RolloutWorker, StepDriver, WorkerStats,
                      drive_step)
from .types import *  # noqa: F401,F403
from .types import __all__ as _types_all

__all__ = ["Client", "RolloutWorker", "StepDriver", "drive_step", "ActRequest", "Move", "Observation", "Episode",
           "Env", "WorkerStats", "PatrdbError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict",
           "ServerError", "BadResponse", "IncompatibleServer", "MIN_API_VERSION", "new_client_key", "Batch", "SafetensorsError",
           "parse_safetensors"] + list(_types_all)
