"""Images and rich displays that a tool result carries beside its text.

A tool result's ``content`` is always text: every provider, hook and view reads it. A
result may also hold ``images`` (``ImagePart``: a media type and base64 data), which a
model that accepts images receives as image content parts and any other model as a text
placeholder (``ImagePart.placeholder``), and ``displays`` (``DisplayData``: a
DataFrame's HTML, a figure) that the cell shows the person and the model never sees.

Bounds, applied where a tool result is made (``bound_images``): at most ``MAX_IMAGES``
images per result, each at most ``MAX_IMAGE_BYTES`` of base64 (what goes over the wire);
what is left out is named in a note the model reads. A display keeps only the kinds of
data a notebook renders, each at most ``MAX_DISPLAY_CHARS``.

Secrets are scrubbed from text, never from images: a plot of a key is sent as drawn.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "DISPLAY_TYPES",
    "MAX_IMAGES",
    "MAX_IMAGE_BYTES",
    "DisplayData",
    "ImagePart",
    "ImageType",
    "bound_images",
    "image_size",
    "with_placeholders",
]

ImageType = Literal["image/png", "image/jpeg", "image/gif", "image/webp"]
IMAGE_TYPES: tuple[ImageType, ...] = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGES = 4
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # base64 characters: Anthropic's limit per image
# What a display may hold: the kinds a notebook renders from plain data (a widget view
# needs its comm, which a captured output does not keep).
DISPLAY_TYPES = (
    "text/plain",
    "text/html",
    "text/markdown",
    "text/latex",
    "image/svg+xml",
    *IMAGE_TYPES,
)
MAX_DISPLAY_CHARS = 1_000_000  # per kind of data; an image is bounded by MAX_IMAGE_BYTES
MAX_IMAGE_TOKENS = 1_600  # a larger image is scaled down by the API before it is counted


class ImagePart(BaseModel):
    """One image of a tool result: ``media_type``, base64 ``data``, and its size in pixels
    when known (read from a PNG, GIF or JPEG header by ``from_bytes``/``from_base64``)."""

    model_config = ConfigDict(frozen=True)

    media_type: ImageType
    data: str
    width: int | None = None
    height: int | None = None

    @classmethod
    def from_bytes(cls, raw: bytes, media_type: ImageType = "image/png") -> ImagePart:
        """An image from its file bytes."""
        size = image_size(raw)
        return cls(
            media_type=media_type,
            data=base64.b64encode(raw).decode("ascii"),
            width=size[0] if size else None,
            height=size[1] if size else None,
        )

    @classmethod
    def from_base64(cls, data: str, media_type: ImageType = "image/png") -> ImagePart:
        """An image from base64 text (as Jupyter's display data holds it; line breaks and
        spaces removed). ``ValueError`` when ``data`` is not base64."""
        data = "".join(data.split())
        try:
            head = base64.b64decode(data[:64 * 1024 // 3 * 4], validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{media_type} data is not base64") from None
        size = image_size(head)
        return cls(
            media_type=media_type,
            data=data,
            width=size[0] if size else None,
            height=size[1] if size else None,
        )

    @property
    def nbytes(self) -> int:
        """The image's size in bytes (decoded)."""
        return len(self.data) * 3 // 4 - self.data[-2:].count("=")

    def describe(self) -> str:
        """``image/png 640×480, 23 KB``."""
        size = f" {self.width}×{self.height}" if self.width and self.height else ""
        return f"{self.media_type}{size}, {_kb(self.nbytes)}"

    def placeholder(self) -> str:
        """What a model that takes text only reads instead of the image."""
        return f"[{self.describe()}: not sent, this model takes text only]"

    def data_url(self) -> str:
        """``data:image/png;base64,…`` (OpenAI's image_url form)."""
        return f"data:{self.media_type};base64,{self.data}"

    def token_estimate(self) -> int:
        """Roughly the input tokens the image costs: the larger of Anthropic's
        ``width × height / 750`` and OpenAI's 85 + 170 per 512-pixel tile, at most about
        1,600 (both APIs scale a large image down); 1,600 when the size is unknown."""
        if not (self.width and self.height):
            return MAX_IMAGE_TOKENS
        w, h = float(self.width), float(self.height)
        fit = min(1.0, 2048 / max(w, h))
        w, h = w * fit, h * fit
        shrink = min(1.0, 768 / min(w, h))
        tiles = math.ceil(w * shrink / 512) * math.ceil(h * shrink / 512)
        return min(MAX_IMAGE_TOKENS, max(85 + 170 * tiles, math.ceil(self.width * self.height / 750)))


class DisplayData(BaseModel):
    """One output a tool showed for the person (Jupyter's ``display_data``): ``data`` maps
    a media type to its text (base64 for images), ``metadata`` as Jupyter gives it."""

    model_config = ConfigDict(frozen=True)

    data: dict[str, str]
    metadata: dict[str, Any] = {}

    @classmethod
    def bounded(cls, data: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> DisplayData | None:
        """A display of the renderable kinds in ``data`` (bytes as base64), each within its
        bound; ``None`` when none is left."""
        kept: dict[str, str] = {}
        for kind in DISPLAY_TYPES:
            value = data.get(kind)
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii") if kind in IMAGE_TYPES else value.decode("utf-8", "replace")
            if not isinstance(value, str):
                continue
            limit = MAX_IMAGE_BYTES if kind in IMAGE_TYPES else MAX_DISPLAY_CHARS
            if len(value) <= limit:
                kept[kind] = value
        if not kept:
            return None
        meta = {k: v for k, v in (metadata or {}).items() if k in kept and isinstance(v, dict)}
        return cls(data=kept, metadata=meta)

    def image(self) -> ImagePart | None:
        """The display's image (its first kind a model can take), if it has one."""
        for kind in IMAGE_TYPES:
            if kind in self.data:
                try:
                    return ImagePart.from_base64(self.data[kind], kind)
                except ValueError:
                    return None
        return None


def with_placeholders(text: str, images: Iterable[ImagePart]) -> str:
    """``text`` followed by a placeholder line for each image: a tool result as a model
    that takes text only reads it."""
    return "\n".join([text, *(image.placeholder() for image in images)]).strip()


def bound_images(
    images: Iterable[ImagePart], *, max_images: int = MAX_IMAGES, max_bytes: int = MAX_IMAGE_BYTES
) -> tuple[tuple[ImagePart, ...], str]:
    """The images a tool result may carry, and a note naming those left out (``""`` when
    none was): at most ``max_images``, each at most ``max_bytes`` of base64."""
    kept: list[ImagePart] = []
    notes: list[str] = []
    extra = 0
    for image in images:
        if len(image.data) > max_bytes:
            notes.append(
                f"[{image.describe()}: not sent, {_kb(len(image.data))} as base64 is over the "
                f"{_kb(max_bytes)} limit per image]"
            )
        elif len(kept) >= max_images:
            extra += 1
        else:
            kept.append(image)
    if extra:
        notes.append(f"[{extra} more image{'s' if extra > 1 else ''} not sent: at most {max_images} per result]")
    return tuple(kept), "\n".join(notes)


def image_size(head: bytes) -> tuple[int, int] | None:
    """``(width, height)`` from the first bytes of a PNG, GIF or JPEG file; ``None`` when
    they do not say (another format, or too few bytes)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24 and head[12:16] == b"IHDR":
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(head)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length field
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):  # a start of frame
            return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
        i += 2 + length
    return None


def _kb(nbytes: int) -> str:
    if nbytes >= 1024 * 1024:
        return f"{nbytes / (1024 * 1024):.1f} MB"
    return f"{max(1, round(nbytes / 1024))} KB"


# A run view's static copy in a saved notebook (``notebook.widgets.view_static``) is wrapped in these
# comments, so that tools reading notebooks (``testing.run_notebook``, nbval's sanitizer in
# ``notebooks/nbval_sanitize.cfg``) can find it as one piece.
STATIC_VIEW_OPEN = "<!-- harness_nb run view -->"
STATIC_VIEW_CLOSE = "<!-- /harness_nb run view -->"
