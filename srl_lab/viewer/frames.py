"""Rendered frames made watchable: a caption bar (version, step, phase, teams), PNGs and a GIF.

PNGs are what the panel's player shows one by one (scrubbing needs single frames); the GIF is the
saved video (``videos/``) and what TensorBoard shows in its Images tab, since it animates GIFs.
"""
from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from PIL import Image, ImageDraw, ImageFont

CAPTION_PX = 24  # height of one line of the bar above each frame
TEXT = (36, 41, 47)
BAR = (246, 248, 250)


def fit(frame: np.ndarray, pixels: int) -> np.ndarray:
    """``frame`` scaled so its longer side is ``pixels`` (unchanged when it already is)."""
    h, w = frame.shape[:2]
    if max(h, w) == pixels:
        return frame
    scale = pixels / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    return np.asarray(Image.fromarray(frame).resize(size, Image.BILINEAR))


def caption(frame: np.ndarray, text: str, legend: Sequence[tuple[str, tuple[int, int, int]]] = ()) -> np.ndarray:
    """``frame`` under a bar holding ``text`` and coloured ``legend`` entries (right-aligned, or on a
    second line when the frame is too narrow for both)."""
    h, w = frame.shape[:2]
    font = _font()
    measure = ImageDraw.Draw(Image.new("RGB", (1, 1)))
    legend_px = sum(int(measure.textlength(label, font=font)) + 26 for label, _ in legend)
    rows = 1 if int(measure.textlength(text, font=font)) + legend_px + 18 <= w else 2
    bar = CAPTION_PX * rows
    image = Image.new("RGB", (w, h + bar), BAR)
    image.paste(Image.fromarray(np.ascontiguousarray(frame[..., :3])), (0, bar))
    draw = ImageDraw.Draw(image)
    draw.text((6, 5), text, fill=TEXT, font=font)
    x, y = w - 6, 5 + CAPTION_PX * (rows - 1)
    for label, colour in reversed(legend):
        x -= int(draw.textlength(label, font=font))
        draw.text((x, y), label, fill=TEXT, font=font)
        x -= 16
        draw.ellipse((x, y + 2, x + 11, y + 13), fill=colour)
        x -= 10
    return np.asarray(image)


def _font() -> ImageFont.ImageFont | ImageFont.FreeTypeFont:
    try:
        return ImageFont.load_default(size=13)
    except (TypeError, OSError):  # a Pillow without FreeType: its bitmap font
        return ImageFont.load_default()


def png(frame: np.ndarray) -> bytes:
    """One frame as PNG bytes (fast compression: these are made for every frame of every episode)."""
    out = io.BytesIO()
    Image.fromarray(frame).save(out, format="PNG", compress_level=1)
    return out.getvalue()


def gif(frames: Sequence[np.ndarray], fps: float) -> bytes:
    """An animated, looping GIF of ``frames`` (one palette, taken from the middle frame, for all)."""
    if not frames:
        raise ValueError("a video needs at least one frame")
    images = [Image.fromarray(f) for f in frames]
    palette = images[len(images) // 2].quantize(colors=255, method=Image.Quantize.MEDIANCUT)
    paletted = [im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images]
    out = io.BytesIO()
    paletted[0].save(out, format="GIF", save_all=True, append_images=paletted[1:],
                     duration=max(20, round(1000 / fps)), loop=0, optimize=False)
    return out.getvalue()
