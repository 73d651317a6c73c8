"""Inputs that are not text: a folder of images or of audio clips, as a corpus the extraction reads.

A :class:`MediaCorpus` plays the part of :class:`isoscope.engine.inputs.corpus.Corpus` for images and
audio: ``items`` (decoded pixels or samples), ``texts`` (each item's relative path: what every
view shows where a text corpus shows the text), ``labels`` (the class: the sub-folder name, or
``""``), ``kind`` ("image" | "audio"), ``sha`` (a content hash for cache keys) and ``notices``
(every limit applied and every file skipped, by name).

Images are decoded to RGB uint8 (H, W, 3); audio to mono float32 at the file's own rate (the model's
rate is applied at extraction, :func:`resample`). What a processor cannot take is converted where
that is sound, and the note names the files: grayscale, 1-bit, palette and CMYK images become RGB;
16-bit images are scaled to 8 bits (not clipped at 255); transparent pixels are put on white (not on
whatever colour the file stores under alpha 0); EXIF rotation is applied. An image of any size down
to 1x1 goes to the processor as a PIL image, which resizes it like any other (as an array, a 1x1 or
3x3 image's channel axis is ambiguous to it: :func:`isoscope.engine.extraction.media.as_pil`). Clips
are averaged to mono, read at any bit depth (8/16/24/32-bit, float) and resampled to the model's
rate; clips with non-finite samples (a float file holding NaN or inf) are skipped by name, and clips
too short to give one frame of the model are skipped by name at extraction
(:func:`isoscope.engine.extraction.media.prepare_media`). Files are read in sorted relative-path
order, so item indices never depend on the file system. The bundled demo sets (:func:`demo_images`,
:func:`demo_speech`) need no download.
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import BinaryIO

import numpy as np

from isoscope.engine.errors import InputError
from isoscope.engine.inputs.files import files_under, read_capped

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")
AUDIO_SUFFIXES = (".wav", ".flac")
KINDS = ("image", "audio")
KIND_NOUNS = {"text": "texts", "image": "images", "audio": "audio clips"}  # what a line calls them
MAX_FILES = 500
MAX_WALKED_FILES = 100_000  # files a media folder may hold at all (others than images count)
MAX_IMAGE_PIXELS = (
    2048 * 2048
)  # larger images are scaled down to this (the processor resizes anyway)
MAX_AUDIO_SECONDS = 30.0  # longer clips are cut
SMALL_IMAGE_SIDE = (
    14  # px: the smallest patch of common ViTs (DINOv2); below it a patch is upscaling
)
_HIGH_DEPTH_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I")  # 16/32-bit integer grayscale

DEMO_IMAGES_NAME = (
    "bundled sample images (scikit-learn's china and flower, 4 tiles each, CC BY 2.0)"
)
DEMO_SPEECH_NAME = "bundled speech (8 sample-corpus sentences read by espeak-ng)"
DEMO_SPEECH_SENTENCES = 8


@dataclass(frozen=True, eq=False)
class MediaItem:
    """One decoded file: ``data`` is RGB uint8 (H, W, 3) for an image, mono float32 (n,) for audio
    (``rate`` samples per second; 0 for images)."""

    path: str  # relative to the folder, posix
    label: str  # the class: first sub-folder, "" at the top level
    data: np.ndarray
    rate: int = 0

    @property
    def seconds(self) -> float:
        return len(self.data) / self.rate if self.rate else 0.0


@dataclass(frozen=True, eq=False)
class MediaCorpus:
    """Images or audio clips to analyse, and the notices of what reading them changed or skipped."""

    items: tuple[MediaItem, ...]
    name: str
    kind: str  # "image" | "audio"
    notices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.items:
            raise InputError(f"{self.name}: no readable {self.kind} files")

    def __len__(self) -> int:
        return len(self.items)

    @property
    def texts(self) -> tuple[str, ...]:
        """Each item's relative path: its name wherever a view shows a text."""
        return tuple(item.path for item in self.items)

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(item.label for item in self.items)

    def head(self, count: int) -> MediaCorpus:
        """The first ``count`` items (an ablation's or a sweep's few inputs), same name and kind."""
        return MediaCorpus(self.items[: max(1, count)], self.name, self.kind)

    @cached_property
    def sha(self) -> str:
        """Content hash used in cache keys: kind, then each item's path, class, shape, rate, data."""
        h = hashlib.sha256(self.kind.encode())
        for item in self.items:
            h.update(
                f"\x00{item.path}\x00{item.label}\x00{item.data.shape}\x00{item.rate}".encode()
            )
            h.update(np.ascontiguousarray(item.data).tobytes())
        return h.hexdigest()[:20]


def media_files(folder: str | Path, kind: str) -> list[Path]:
    """The ``kind`` files of ``folder`` (recursively, hidden files skipped), sorted by relative path."""
    folder = Path(folder).expanduser()
    if not folder.exists():
        raise InputError(f"{kind} folder {str(folder)!r} does not exist")
    if not folder.is_dir():
        raise InputError(f"{str(folder)!r} is a file; pass a folder of {_suffix_list(kind)} files")
    # every file, of other types too (they are named in a notice); bounded so a huge tree stops
    return files_under(folder, f"a folder of {kind} files", MAX_WALKED_FILES)


def _suffix_list(kind: str) -> str:
    return ", ".join(IMAGE_SUFFIXES if kind == "image" else AUDIO_SUFFIXES)


def load_media_folder(
    folder: str | Path,
    kind: str,
    *,
    max_files: int = MAX_FILES,
    max_pixels: int = MAX_IMAGE_PIXELS,
    max_seconds: float = MAX_AUDIO_SECONDS,
    name: str | None = None,
) -> MediaCorpus:
    """Read a folder of images (``kind="image"``) or audio clips (``kind="audio"``).

    The class of a file is its first sub-folder (``cats/a.png`` -> ``cats``). Files of other types
    and broken files are skipped with a notice naming them; past ``max_files`` the rest are left
    out; images over ``max_pixels`` are scaled down, clips over ``max_seconds`` cut. A folder with
    nothing left is one :class:`InputError`.
    """
    if kind not in KINDS:
        raise InputError(f"unknown input kind {kind!r}; use one of {', '.join(KINDS)}")
    folder = Path(folder).expanduser()
    files = media_files(folder, kind)
    suffixes = IMAGE_SUFFIXES if kind == "image" else AUDIO_SUFFIXES
    notices: list[str] = []
    other = [p for p in files if p.suffix.lower() not in suffixes]
    files = [p for p in files if p.suffix.lower() in suffixes]
    if other:
        notices.append(
            f"{len(other)} file(s) that are not {_suffix_list(kind)} were skipped: "
            + _names(other, folder)
        )
    if len(files) > max_files:
        notices.append(
            f"only the first {max_files:,} of {len(files):,} {kind} files are used (limit)"
        )
        files = files[:max_files]
    items: list[MediaItem] = []
    broken: list[str] = []
    converted: dict[str, list[str]] = {}  # what was done -> the files it was done to
    scaled = cut = 0
    for path in files:
        rel = path.relative_to(folder)
        label = rel.parts[0] if len(rel.parts) > 1 else ""
        try:
            raw = io.BytesIO(read_capped(path, f"an {kind} file" if kind == "image" else "a clip"))
            if kind == "image":
                data, was_scaled, changes = read_image(raw, max_pixels)
                scaled += was_scaled
                for change in changes:
                    converted.setdefault(change, []).append(rel.as_posix())
                items.append(MediaItem(rel.as_posix(), label, data))
            else:
                data, rate, was_cut = read_audio(raw, max_seconds)
                cut += was_cut
                items.append(MediaItem(rel.as_posix(), label, data, rate))
        except Exception as exc:  # any decoder error: skip the file, name it
            broken.append(f"{rel.as_posix()} ({_reason(exc)})")
    if broken:
        notices.append(f"{len(broken)} unreadable file(s) skipped: " + "; ".join(broken[:10]))
    for change, names in converted.items():
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        notices.append(f"{len(names)} image(s) {change}: {shown}")
    if scaled:
        notices.append(f"{scaled} image(s) over {max_pixels:,} pixels were scaled down (limit)")
    if cut:
        notices.append(f"{cut} clip(s) longer than {max_seconds:g} s were cut (limit)")
    display = name or folder.name or str(folder)
    if not items:
        found = f"{len(files)} {kind} file(s), none readable" if files else f"no {kind} files"
        raise InputError(
            f"{display}: {found}; give a folder of {_suffix_list(kind)} files"
            + (f" ({notices[-1]})" if broken else "")
        )
    return MediaCorpus(tuple(items), display, kind, tuple(notices))


def _names(paths: list[Path], folder: Path, most: int = 5) -> str:
    names = [p.relative_to(folder).as_posix() for p in paths[:most]]
    return ", ".join(names) + (f" and {len(paths) - most} more" if len(paths) > most else "")


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:120]


def read_image(
    path: Path | BinaryIO, max_pixels: int = MAX_IMAGE_PIXELS
) -> tuple[np.ndarray, bool, list[str]]:
    """RGB uint8 (H, W, 3) pixels of an image file, scaled down to ``max_pixels``; whether it
    was; and what else was done to it (the module doc's conversions, as note phrases)."""
    from PIL import Image, ImageOps

    changes: list[str] = []
    with Image.open(path) as opened:
        opened.load()
        image: Image.Image = opened
        if image.getexif().get(0x0112, 1) != 1:  # the EXIF Orientation tag: a phone's rotation
            image = ImageOps.exif_transpose(image)
            changes.append("were turned upright (EXIF orientation)")
        rgb = _to_rgb(image, changes)
    scaled = rgb.width * rgb.height > max_pixels
    if scaled:
        factor = (max_pixels / (rgb.width * rgb.height)) ** 0.5
        size = (max(1, int(rgb.width * factor)), max(1, int(rgb.height * factor)))
        rgb = rgb.resize(size, Image.Resampling.BICUBIC)
    return np.asarray(rgb, dtype=np.uint8), scaled, changes


def _to_rgb(image, changes: list[str]):
    """``image`` as an 8-bit RGB PIL image (module doc), noting each conversion in ``changes``."""
    from PIL import Image

    mode = image.mode
    if mode == "RGB":
        return image
    if mode in _HIGH_DEPTH_MODES:  # scale the range to 8 bits: convert("RGB") would clip at 255
        values = np.asarray(image, dtype=np.float64)
        peak = float(values.max(initial=0))
        # "I" is a 32-bit container: its values say the depth (some decoders open 16-bit PNGs so)
        top = 65535.0 if mode.startswith("I;16") or 255 < peak <= 65535 else max(peak, 255.0)
        gray = np.clip(np.rint(values * (255.0 / top)), 0, 255).astype(np.uint8)
        changes.append("of more than 8 bits per sample were scaled to 8 bits")
        return Image.fromarray(gray).convert("RGB")
    if mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        changes.append("with transparency were put on white")
        return Image.alpha_composite(white, rgba).convert("RGB")
    names = {"L": "grayscale", "1": "1-bit", "P": "palette", "CMYK": "CMYK", "YCbCr": "YCbCr"}
    changes.append(f"in {names.get(mode, mode)} were converted to RGB")
    return image.convert("RGB")


def read_audio(
    path: Path | BinaryIO, max_seconds: float = MAX_AUDIO_SECONDS
) -> tuple[np.ndarray, int, bool]:
    """Mono float32 samples of a wav/flac file (channels averaged), its rate, and whether it was
    cut. Only the first ``max_seconds`` are decoded: a small compressed file cannot expand into
    more samples than the limit keeps."""
    import soundfile

    with soundfile.SoundFile(path if not isinstance(path, Path) else str(path)) as clip:
        rate = int(clip.samplerate)
        most = int(max_seconds * rate)
        data = clip.read(frames=most + 1, dtype="float32", always_2d=True)
    if data.shape[0] == 0:
        raise ValueError("no samples")
    if not np.isfinite(data).all():
        raise ValueError("holds NaN or infinite samples")
    mono = data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono[:most]), rate, len(mono) > most


def resample(samples: np.ndarray, rate: int, target: int) -> np.ndarray:
    """``samples`` at ``rate`` resampled to ``target`` (polyphase filter, scipy), float32."""
    if rate == target:
        return samples.astype(np.float32, copy=False)
    from math import gcd

    from scipy.signal import resample_poly

    g = gcd(int(rate), int(target))
    return resample_poly(samples, target // g, rate // g).astype(np.float32)


# ----------------------------------------------------------------------------- bundled demo sets


def demo_images(tiles: int = 2) -> MediaCorpus:
    """scikit-learn's two sample photos (china.jpg, flower.jpg; CC BY 2.0, Flickr users
    danielbuechele and vultilion, see sklearn/datasets/images/README.txt), each cut into
    ``tiles x tiles`` tiles; the class is the photo."""
    from sklearn.datasets import load_sample_images

    bunch = load_sample_images()
    items = []
    for image, filename in zip(bunch.images, bunch.filenames, strict=True):
        label = Path(filename).stem
        h, w = image.shape[0] // tiles, image.shape[1] // tiles
        for r in range(tiles):
            for c in range(tiles):
                tile = np.ascontiguousarray(image[r * h : (r + 1) * h, c * w : (c + 1) * w])
                items.append(MediaItem(f"{label}/tile_r{r}c{c}", label, tile.astype(np.uint8)))
    return MediaCorpus(tuple(items), DEMO_IMAGES_NAME, "image")


def demo_speech_dir(cache_dir: Path | None = None) -> Path:
    """Where :func:`demo_speech` keeps its synthesised clips (in isoscope's cache folder)."""
    from isoscope.engine.environment import default_cache_dir

    return (cache_dir or default_cache_dir()) / "demo_speech"


def demo_speech(cache_dir: Path | None = None, count: int = DEMO_SPEECH_SENTENCES) -> MediaCorpus:
    """The first ``count`` sentences of the bundled sample corpus (CC0) read by espeak-ng, made
    once into the cache folder (espeak-ng's 22.05 kHz wav; resampled at extraction). Without
    espeak-ng: one :class:`InputError` saying how to install it."""
    from isoscope.engine.inputs.corpus import bundled_corpus

    folder = demo_speech_dir(cache_dir)
    sentences = bundled_corpus().texts[:count]
    wanted = [folder / f"sentence_{i:02d}.wav" for i in range(len(sentences))]
    if not all(p.is_file() for p in wanted):
        espeak = shutil.which("espeak-ng")
        if espeak is None:
            raise InputError(
                "the bundled speech set is synthesised with espeak-ng, which is not installed: "
                "`apt-get install espeak-ng` (or brew install espeak-ng), or pass --audio DIR"
            )
        folder.mkdir(parents=True, exist_ok=True)
        for path, sentence in zip(wanted, sentences, strict=True):
            tmp = path.with_name(path.stem + ".tmp.wav")
            subprocess.run(
                [espeak, "-v", "en", "-s", "160", "-w", str(tmp), sentence],
                check=True,
                capture_output=True,
                timeout=60,
            )
            tmp.replace(path)
    return load_media_folder(folder, "audio", name=DEMO_SPEECH_NAME)
