"""The client's records speak the vocabulary of docs/json-schema.json.

Each dataclass of ``patrdb_client.types`` is held to the schema object of
the same name: the same JSON field names (no field the server does not
send, none it sends missing) and compatible types. The schema is derived
from the server's Go types, so a field renamed there fails here until the
client follows.
"""

import dataclasses
import json
import os
import typing
import unittest

from patrdb_client import types

SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "docs", "json-schema.json")

# Records the client builds for requests only, or that have no object of
# their own in the schema, with the reason.
NOT_IN_SCHEMA = {}


def _load_defs():
    with open(SCHEMA, encoding="utf-8") as f:
        return json.load(f)["$defs"]


def _kinds(schema):
    """The JSON types a property schema admits, and its $ref if any."""
    if "anyOf" in schema:
        kinds, ref = set(), None
        for s in schema["anyOf"]:
            k, r = _kinds(s)
            kinds |= k
            ref = ref or r
        return kinds, ref
    if "$ref" in schema:
        return {"object"}, schema["$ref"].rsplit("/", 1)[-1]
    t = schema.get("type")
    if t is None:
        return {"any"}, None
    return (set(t) if isinstance(t, list) else {t}), None


def _compatible(tp, schema):
    """Why Python type tp cannot hold what schema describes, or ''."""
    kinds, ref = _kinds(schema)
    if "any" in kinds or tp is typing.Any:
        return ""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return _compatible(inner[0], schema) if len(inner) == 1 else ""
    kinds = kinds - {"null"}
    if origin in (list, typing.List):
        return "" if kinds == {"array"} else f"list for {sorted(kinds)}"
    if origin in (dict, typing.Dict):
        return "" if kinds == {"object"} else f"dict for {sorted(kinds)}"
    if dataclasses.is_dataclass(tp):
        if ref is None:
            return f"{tp.__name__} for {sorted(kinds)}"
        return "" if ref == tp.__name__ else f"{tp.__name__} for {ref}"
    want = {int: {"integer"}, float: {"number"}, str: {"string"}, bool: {"boolean"}, bytes: {"string"}}.get(tp)
    if want is None:
        return f"unchecked type {tp}"
    return "" if kinds == want else f"{tp.__name__} for {sorted(kinds)}"


class VocabularyTest(unittest.TestCase):
    def test_records_match_schema(self):
        defs = _load_defs()
        checked = 0
        for name in types.__all__:
            cls = getattr(types, name)
            if not dataclasses.is_dataclass(cls):
                continue
            if name in NOT_IN_SCHEMA:
                continue
            with self.subTest(record=name):
                self.assertIn(name, defs, f"{name}: no object of that name in the schema")
                props = defs[name].get("properties", {})
                hints = typing.get_type_hints(cls)
                fields = {f.metadata.get("json", f.name): f for f in dataclasses.fields(cls)}
                extra = sorted(set(fields) - set(props))
                missing = sorted(set(props) - set(fields))
                self.assertEqual(extra, [], f"{name}: fields the server does not send")
                self.assertEqual(missing, [], f"{name}: fields the server sends that the client drops")
                for js, f in fields.items():
                    why = _compatible(hints[f.name], props[js])
                    self.assertEqual(why, "", f"{name}.{js}: {why}")
                checked += 1
        self.assertGreater(checked, 30)

    def test_every_schema_record_the_api_sends_has_a_client_type(self):
        defs = _load_defs()
        api = ["Run", "Group", "Node", "Turn", "PathTurn", "Segment", "Advantage", "Rubric", "Checkpoint", "Event",
               "RunSummary", "GroupTree", "NodeInfo", "Trajectory", "EventPage", "Stats", "Lease", "LeaseState",
               "Submitted", "StepStatus", "PendingResult", "PendingWork", "ShapeResult"]
        for name in api:
            self.assertIn(name, defs)
            self.assertTrue(hasattr(types, name), f"the client has no type for {name}")


if __name__ == "__main__":
    unittest.main()
