"""`ScriptedPushTPolicy`: a closed-loop pushing controller that generates PushT demonstrations.

It reads the block pose (privileged simulator state, as scripted demonstrators do) and, every control step,
picks the contact point on the T's outline where pushing inward moves the block most towards its goal pose:
for a candidate point ``q`` (block frame) with outward normal ``n``, the desired displacement of that point is
``goal(q) - current(q)`` (a rigid displacement field that mixes translation and rotation), and the score is its
component along the inward normal. The agent approaches the chosen point from outside (going around the block
when the straight path would hit it) and then pushes through it. No learning, no randomness beyond the
optional action noise the data module uses to vary demonstrations.
"""

from __future__ import annotations

import math

import numpy as np

AGENT_RADIUS = 15.0
GOAL_POSE = (256.0, 256.0, math.pi / 4)

# The T's outline in the block frame (gym-pusht's add_tee, scale 30): edges as (start, end, outward normal).
_OUTLINE = [
    ((-60, 0), (60, 0), (0, -1)),
    ((60, 0), (60, 30), (1, 0)),
    ((60, 30), (15, 30), (0, 1)),
    ((15, 30), (15, 120), (1, 0)),
    ((15, 120), (-15, 120), (0, 1)),
    ((-15, 120), (-15, 30), (-1, 0)),
    ((-15, 30), (-60, 30), (0, 1)),
    ((-60, 30), (-60, 0), (-1, 0)),
]


def _candidates(spacing: float = 7.5, margin: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
    points, normals = [], []
    for (ax, ay), (bx, by), normal in _OUTLINE:
        length = math.hypot(bx - ax, by - ay)
        for s in np.arange(margin, length - margin + 1e-6, spacing):
            t = s / length
            points.append((ax + t * (bx - ax), ay + t * (by - ay)))
            normals.append(normal)
    return np.array(points, dtype=np.float64), np.array(normals, dtype=np.float64)


CANDIDATE_POINTS, CANDIDATE_NORMALS = _candidates()
T_CENTROID = np.array([0.0, 45.0])  # the block's centre of gravity in the block frame (gym-pusht)


def _rotation(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def to_world(pose: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Block-frame points ``[K, 2]`` to world coordinates under ``pose = (x, y, angle)`` (pymunk's convention)."""
    return local @ _rotation(float(pose[2])).T + np.asarray(pose[:2], dtype=np.float64)


class ScriptedPushTPolicy:
    """The demonstrator: ``act(agent_position, block_pose) -> target agent position`` for one environment.

    Args:
        max_move: cap on the distance between the agent and its commanded target per step (pixels), so the
            PD-controlled agent moves smoothly.
        push_depth: how far beyond the contact point the target lies while pushing (pixels).
        stickiness: score bonus for the current contact point (fewer switches, less dithering).
    """

    def __init__(self, max_move: float = 30.0, push_depth: float = 12.0, stickiness: float = 4.0) -> None:
        self.max_move, self.push_depth, self.stickiness = max_move, push_depth, stickiness
        self.goal = np.array(GOAL_POSE)
        self.current: int | None = None

    def reset(self) -> None:
        self.current = None

    def act(self, agent: np.ndarray, block_pose: np.ndarray) -> np.ndarray:
        agent = np.asarray(agent, dtype=np.float64)
        rotation = _rotation(float(block_pose[2]))
        points = to_world(block_pose, CANDIDATE_POINTS)
        normals = CANDIDATE_NORMALS @ rotation.T  # outward, world frame
        wanted = to_world(self.goal, CANDIDATE_POINTS) - points
        score = -(wanted * normals).sum(1)  # component of the wanted motion along the inward push
        if self.current is not None:
            score[self.current] += self.stickiness
        best = int(np.argmax(score))
        self.current = best
        contact, normal = points[best], normals[best]
        approach = contact + normal * (AGENT_RADIUS + 6.0)
        if np.linalg.norm(agent - approach) < 8.0 or self._pushing(agent, contact, normal):
            target = contact - normal * self.push_depth
        else:
            target = self._around(agent, approach, block_pose)
        step = target - agent
        distance = float(np.linalg.norm(step))
        if distance > self.max_move:
            target = agent + step * (self.max_move / distance)
        return np.clip(target, 0.0, 512.0).astype(np.float32)

    @staticmethod
    def _pushing(agent: np.ndarray, contact: np.ndarray, normal: np.ndarray) -> bool:
        offset = agent - contact
        along = float(offset @ normal)
        across = float(np.linalg.norm(offset - along * normal))
        return -2.0 <= along <= AGENT_RADIUS + 8.0 and across < 6.0

    def _around(self, agent: np.ndarray, approach: np.ndarray, block_pose: np.ndarray) -> np.ndarray:
        """The next waypoint towards ``approach`` that keeps the agent clear of the block."""
        centre = to_world(block_pose, T_CENTROID[None])[0]
        if not self._blocked(agent, approach, block_pose):
            return approach
        radius = 105.0
        a_agent = math.atan2(*(agent - centre)[::-1])
        a_goal = math.atan2(*(approach - centre)[::-1])
        delta = (a_goal - a_agent + math.pi) % (2 * math.pi) - math.pi
        angle = a_agent + math.copysign(min(abs(delta), math.radians(40)), delta)
        return centre + radius * np.array([math.cos(angle), math.sin(angle)])

    @staticmethod
    def _blocked(start: np.ndarray, end: np.ndarray, block_pose: np.ndarray) -> bool:
        from shapely.geometry import LineString, Polygon

        outline = to_world(block_pose, np.array([e[0] for e in _OUTLINE], dtype=np.float64))
        return LineString([tuple(start), tuple(end)]).distance(Polygon(outline)) < AGENT_RADIUS + 2.0
