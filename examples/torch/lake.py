"""FrozenLake as text, for a token-level policy: Gymnasium's FrozenLake-v1 maps and
move rule, rendered with a tiny fixed vocabulary, the PaTR progress scorer, and
an env-step budget shared by every episode of a run.

Sequences a policy reads (one token per word):

    prompt:       <bos> map S F F F / F H F H / F F F H / H F F G go
    each turn:    <action>                         one of left, down, right, up
                  r<row> c<col> <tile>             the cell the move led to

The goal pays ``discount ** (moves - 1)`` (1 for the shortest walk), a hole or
the turn cap pays 0; the outcome reward of a leaf is the sum of its turns'.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from typing import List, Optional, Sequence

from patrdb_client import Move, Observation, Task, Turn, TurnKey

MAPS = {
    # gymnasium.envs.toy_text.frozen_lake.MAPS
    "4x4": ["SFFF", "FHFH", "FFFH", "HFFG"],
    "8x8": ["SFFFFFFF", "FFFFFFFF", "FFFHFFFF", "FFFFFHFF", "FFFHFFFF", "FHHFFFHF", "FHFFHFHF", "FFFHFFFG"],
}

ACTIONS = ["left", "down", "right", "up"]  # Gymnasium's numbering
WORDS = ["<pad>", "<bos>", "map", "go", "/", "S", "F", "H", "G", "cut"] + ACTIONS + \
    [f"r{i}" for i in range(8)] + [f"c{i}" for i in range(8)]
VOCAB = {w: i for i, w in enumerate(WORDS)}
ACTION_IDS = [VOCAB[a] for a in ACTIONS]  # token id of action a
CUT_OBSERVATION = "cut: env-step budget spent"


def tokens(words: Sequence[str]) -> List[int]:
    return [VOCAB[w] for w in words]


def uniform(*keys: int) -> float:
    """A uniform in [0, 1) derived from the keys by hashing, so a draw depends on
    what it is for (seed, step, node, turn, ...), never on the order of draws."""
    h = hashlib.blake2b(struct.pack(f"<{len(keys)}Q", *(k & 0xFFFFFFFFFFFFFFFF for k in keys)), digest_size=8).digest()
    return (int.from_bytes(h, "little") >> 11) / float(1 << 53)


def key_uniform(seed: int, key: TurnKey) -> float:
    return uniform(seed, key.seed, key.step, key.group, key.node, key.branch, key.index, key.path, key.attempt)


class Lake:
    """One board: the move rule, the text, the scorer."""

    def __init__(self, name: str = "4x4", slippery: bool = False, discount: float = 0.99, max_turns: int = 100):
        self.name, self.rows, self.n = name, MAPS[name], len(MAPS[name])
        self.slippery, self.discount, self.max_turns = slippery, discount, max_turns
        self.start = 0
        self.goal = self.n * self.n - 1

    def tile(self, pos: int) -> str:
        return self.rows[pos // self.n][pos % self.n]

    def prompt_words(self) -> List[str]:
        words = ["<bos>", "map"]
        for i, row in enumerate(self.rows):
            words += list(row) + (["/"] if i < self.n - 1 else [])
        return words + ["go"]

    def task(self, task_id: str) -> Task:
        return Task(id=task_id, prompt=" ".join(self.prompt_words()), prompt_tokens=tokens(self.prompt_words()))

    def move(self, pos: int, action: int, u: float) -> int:
        """Gymnasium's step: on ice the move is (a-1, a, a+1) mod 4 with equal odds;
        walking into the edge stays put."""
        if self.slippery:
            action = (action + (3 if u < 1 / 3 else 0 if u < 2 / 3 else 1)) % 4
        r, c = divmod(pos, self.n)
        if action == 0:
            c = max(c - 1, 0)
        elif action == 1:
            r = min(r + 1, self.n - 1)
        elif action == 2:
            c = min(c + 1, self.n - 1)
        else:
            r = max(r - 1, 0)
        return r * self.n + c

    def observation_words(self, pos: int) -> List[str]:
        return [f"r{pos // self.n}", f"c{pos % self.n}", self.tile(pos)]

    def terminal(self, pos: int) -> bool:
        return self.tile(pos) in "HG"

    def reward(self, pos: int, moves: int) -> float:
        return self.discount ** (moves - 1) if self.tile(pos) == "G" else 0.0

    def positions(self, history: Sequence[Turn]) -> List[int]:
        """The cells a history visited, the start first (a cut turn visits none)."""
        out = [self.start]
        for t in history:
            toks = list(t.observation_tokens)
            if len(toks) == 3:
                out.append(int(WORDS[toks[0]][1:]) * self.n + int(WORDS[toks[1]][1:]))
        return out

    def progress(self, positions: Sequence[int]) -> float:
        """PaTR's process score: 0 in a hole, 1 on the goal, else the closeness to the
        goal (1 - manhattan / max manhattan) less 0.1 x the share of revisiting moves."""
        last = positions[-1]
        if self.tile(last) == "H":
            return 0.0
        if self.tile(last) == "G":
            return 1.0
        r, c = divmod(last, self.n)
        s = 1 - ((self.n - 1 - r) + (self.n - 1 - c)) / (2 * (self.n - 1))
        moves = len(positions) - 1
        if moves > 0:
            s -= 0.1 * (moves + 1 - len(set(positions))) / moves
        return min(max(s, 0.0), 1.0)


class Budget:
    """The env steps a run may still play, shared by its episodes; None is unlimited.
    Once it is spent every move is refused: the turn says so, ends the episode with
    reward 0, is no env step, and its group is marked cut (not trained on)."""

    def __init__(self, steps: Optional[int]):
        self.left, self.played, self.cut_groups = steps, 0, set()
        self.lock = threading.Lock()

    def take(self, group: int) -> bool:
        with self.lock:
            if self.left is not None and self.left <= 0:
                self.cut_groups.add(group)
                return False
            if self.left is not None:
                self.left -= 1
            self.played += 1
            return True


class Episode:
    def __init__(self, lake: Lake, budget: Budget, seed: int, pos: int, moves: int):
        self.lake, self.budget, self.seed, self.pos, self.moves = lake, budget, seed, pos, moves

    def step(self, key: TurnKey, move: Move) -> Observation:
        if not self.budget.take(key.group):
            return Observation(text=CUT_OBSERVATION, tokens=tokens(["cut"]), reward=0.0, done=True)
        a = ACTIONS.index(move.text)
        self.pos = self.lake.move(self.pos, a, key_uniform(self.seed, key))
        self.moves += 1
        words = self.lake.observation_words(self.pos)
        done = self.lake.terminal(self.pos)
        return Observation(text=" ".join(words), tokens=tokens(words), reward=self.lake.reward(self.pos, self.moves),
                           done=done)

    def state(self) -> Optional[bytes]:
        return struct.pack("<ii", self.pos, self.moves)


class Env:
    """RolloutWorker's environment: episodes on one lake, drawing the slip from the
    turn's key, spending one budget."""

    def __init__(self, lake: Lake, budget: Budget, seed: int):
        self.lake, self.budget, self.seed = lake, budget, seed

    def reset(self, task: Task) -> Episode:
        return Episode(self.lake, self.budget, self.seed, self.lake.start, 0)

    def restore(self, task: Task, history: List[Turn], state: Optional[bytes]) -> Episode:
        if state:
            pos, moves = struct.unpack("<ii", state)
        else:
            positions = self.lake.positions(history)
            pos, moves = positions[-1], len(positions) - 1
        return Episode(self.lake, self.budget, self.seed, pos, moves)

    def score(self, task: Task, history: List[Turn]) -> float:
        return self.lake.progress(self.lake.positions(history))
