"""CarRacing-v3 whose rendering skips polygons far off-screen and keeps its font: the same frames,
faster.

    import rl755.environments.car_racing  # registers ID
    env = gymnasium.make(ID)              # what Environments.CAR_RACING.make() builds

Every step, gymnasium's CarRacing draws its 400 grass squares and the track's road and kerb
polygons (about 300-600): for each it rotates, scales and shifts every vertex in Python, and
draws it only if a vertex lands in the window grown by `MAX_SHAPE_DIM` on each side. Most of a
step's time goes there, and only about 1 polygon in 14 is drawn. Here a cheaper test runs first,
in world coordinates, on all polygons at once (numpy): the grown window lies inside the disk of
radius `_RADIUS` (pixels) around the window's centre, so a polygon with no vertex within
`_RADIUS / zoom` of the world point under that centre cannot pass gymnasium's test, and it is
skipped without the transform. Every other
polygon goes to gymnasium's own `_draw_colored_polygon`, in the same order with the same
arguments, so frames, rewards and dynamics are CarRacing-v3's exactly:
tests/test_car_racing_render.py compares them pixel for pixel, and
benchmarks/car_racing_render.py measures the speed-up beside gymnasium's class.

Registered as `ID` with CarRacing-v3's episode limit and reward threshold.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
from gymnasium.envs.box2d import car_racing as _gym_car_racing

ID = "rl755/CarRacing-v3"
ORIGINAL_ID = "CarRacing-v3"

_W, _H, _MARGIN = _gym_car_racing.WINDOW_W, _gym_car_racing.WINDOW_H, _gym_car_racing.MAX_SHAPE_DIM
# Half the diagonal of gymnasium's grown window: every point of it is this close to the centre.
_RADIUS = 0.5 * math.hypot(_W + 2 * _MARGIN, _H + 2 * _MARGIN)
# Slack for float rounding between this test and gymnasium's (relative, then absolute, pixels).
_SLACK_REL, _SLACK_PX = 1e-6, 1.0


def _grass_patches() -> list[list[tuple[float, float]]]:
    """gymnasium's grass squares, in its drawing order (CarRacing._render_road)."""
    d = _gym_car_racing.GRASS_DIM
    return [
        [(d * x + d, d * y), (d * x, d * y), (d * x, d * y + d), (d * x + d, d * y + d)]
        for x in range(-20, 20, 2)
        for y in range(-20, 20, 2)
    ]


_GRASS = _grass_patches()
_GRASS_VERTICES = np.asarray(_GRASS, np.float64)  # [400, 4, 2]


class CarRacing(_gym_car_racing.CarRacing):
    """gymnasium's CarRacing drawing only the polygons that pass the module docstring's test."""

    _road_vertices: np.ndarray | None = None  # [N, V, 2] world vertices of self.road_poly
    _score_font = None  # pygame Font of the score, kept for an episode

    def reset(self, *args, **kwargs):
        self._road_vertices = None  # reset builds a new track
        self._score_font = None
        return super().reset(*args, **kwargs)

    def _render(self, mode: str):
        """gymnasium's `_render` for observations ("state_pixels"), keeping the score's font.

        gymnasium builds a new 42-point Font every frame, and a new Font's first `render` fills
        its glyph cache, every step. The same steps follow, in
        gymnasium's order and with its arguments. Other modes (videos, the window) and frames
        before the first reset are gymnasium's own.
        """
        g = _gym_car_racing
        if mode != "state_pixels" or "t" not in self.__dict__:
            return super()._render(mode)
        pygame = g.pygame
        if self._score_font is None:
            pygame.font.init()
            self._score_font = pygame.font.Font(pygame.font.get_default_font(), 42)
        self.surf = pygame.Surface((g.WINDOW_W, g.WINDOW_H))
        angle = -self.car.hull.angle
        zoom = 0.1 * g.SCALE * max(1 - self.t, 0) + g.ZOOM * g.SCALE * min(self.t, 1)
        scroll = pygame.math.Vector2(
            (-(self.car.hull.position[0]) * zoom, -(self.car.hull.position[1]) * zoom)
        ).rotate_rad(angle)
        trans = (g.WINDOW_W / 2 + scroll[0], g.WINDOW_H / 4 + scroll[1])
        self._render_road(zoom, trans, angle)
        self.car.draw(self.surf, zoom, trans, angle, False)  # False: no particles, as gymnasium
        self.surf = pygame.transform.flip(self.surf, False, True)
        self._render_indicators(g.WINDOW_W, g.WINDOW_H)
        text = self._score_font.render(f"{self.reward:04.0f}", True, (255, 255, 255), (0, 0, 0))
        text_rect = text.get_rect()
        text_rect.center = (60, g.WINDOW_H - g.WINDOW_H * 2.5 / 40.0)
        self.surf.blit(text, text_rect)
        return self._create_image_array(self.surf, (g.STATE_W, g.STATE_H))

    def _render_road(self, zoom, translation, angle):
        # The same calls as gymnasium's _render_road, in its order: the background, the grass
        # squares, the road and kerb polygons; the culled ones are left out.
        p = _gym_car_racing.PLAYFIELD
        field = [(p, p), (p, -p), (-p, -p), (-p, p)]
        draw = super()._draw_colored_polygon
        draw(self.surf, field, self.bg_color, zoom, translation, angle, clip=False)
        for i in self._near(_GRASS_VERTICES, zoom, translation, angle):
            draw(self.surf, _GRASS[i], self.grass_color, zoom, translation, angle)
        road = self.road_poly
        for i in self._near(self._road_array(), zoom, translation, angle):
            poly, color = road[i]
            poly = [(v[0], v[1]) for v in poly]
            draw(self.surf, poly, [int(c) for c in color], zoom, translation, angle)

    def _road_array(self) -> np.ndarray:
        """self.road_poly's vertices [N, V, 2], built once per track."""
        if self._road_vertices is None:
            road = self.road_poly
            most = max((len(poly) for poly, _ in road), default=1)
            # Pad short polygons with their first vertex: the nearest vertex stays the same.
            padded = [list(poly) + [poly[0]] * (most - len(poly)) for poly, _ in road]
            self._road_vertices = np.asarray(padded, np.float64).reshape(len(road), most, 2)
        return self._road_vertices

    @staticmethod
    def _near(vertices: np.ndarray, zoom, translation, angle) -> np.ndarray:
        """Indices of the polygons [N, V, 2] with a vertex within the disk of the docstring."""
        # The world point under the window's centre: R(-angle) (centre - translation) / zoom
        # (gymnasium maps a world point p to zoom * R(angle) p + translation).
        dx, dy = _W / 2 - translation[0], _H / 2 - translation[1]
        cos, sin = math.cos(-angle), math.sin(-angle)
        centre = np.array([cos * dx - sin * dy, sin * dx + cos * dy]) / zoom
        radius = (_RADIUS * (1 + _SLACK_REL) + _SLACK_PX) / zoom
        d2 = np.square(vertices - centre).sum(axis=-1).min(axis=-1)  # [N]
        return np.flatnonzero(d2 <= radius * radius)


if ID not in gym.registry:
    _original = gym.spec(ORIGINAL_ID)
    gym.register(
        id=ID,
        entry_point=f"{__name__}:CarRacing",
        max_episode_steps=_original.max_episode_steps,
        reward_threshold=_original.reward_threshold,
    )
