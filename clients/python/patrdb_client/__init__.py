"""Python client of patrdb serve: the HTTP API of a patrdb store, standard library only.

    from patrdb_client import Client, TreeRollout, Turn
"""

from .client import (BadRequest, Client, Conflict, Forbidden, NotFound, PatrdbError, ServerError, Unauthorized,
                     new_client_key)
from .batch import Batch, SafetensorsError, parse_safetensors
from .rollout import Branch, TreeRollout
from .types import *  # noqa: F401,F403
from .types import __all__ as _types_all

__all__ = ["Client", "TreeRollout", "Branch", "PatrdbError", "BadRequest", "Unauthorized", "Forbidden", "NotFound",
           "Conflict", "ServerError", "new_client_key", "Batch", "SafetensorsError", "parse_safetensors"] + list(_types_all)
