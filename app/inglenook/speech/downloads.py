"""Speech models to download, Qt-free: the whisper models (Systran's faster-whisper
conversions) and a few Piper voices (rhasspy/piper-voices) that Models → Discover lists under
their own heading, with their size and whether they fit in memory. They are fetched by the
app's own Hub downloader (models/download_queue.py), each file into the speech folder
(paths.speech_models_dir()): a whisper model's files into a folder of its own, model.bin last, so
that the folder is a model (catalog.whisper_models) only once it is whole; a voice's settings
before its .onnx, for the same reason.

    for entry in SPEECH_MODELS: entry.files, entry.dest(), entry.installed(), entry.fits(memory)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from inglenook import paths
from inglenook.core.units import describe_size

MAX_SAMPLE_BYTES = 4 << 20  # a voice's sample is a few seconds of mp3
SAMPLE_SECONDS = 30.0
_WHISPER_FILES = ("config.json", "tokenizer.json", "vocabulary.txt", "model.bin")
_DISTIL_FILES = ("config.json", "preprocessor_config.json", "tokenizer.json",
                 "vocabulary.json", "model.bin")


@dataclass(frozen=True)
class SpeechEntry:
    kind: Literal["whisper", "voice"]
    repo: str
    name: str  # the folder (whisper) or voice name (en_US-joe-medium) it is installed as
    title: str  # for people
    description: str
    size: int  # bytes to download, all files together
    memory: int  # bytes of RAM it needs loaded (int8 for whisper)
    files: tuple[str, ...]  # paths in the repository, in the order they are fetched
    sample: str = ""  # a voice's sample (mp3) in the repository

    def dest(self) -> Path:
        """Where its files go."""
        folder = paths.speech_models_dir()
        return folder / self.name if self.kind == "whisper" else folder

    def installed(self) -> bool:
        from inglenook.speech import catalog

        if self.kind == "whisper":
            return (any(f.name == self.name for f in catalog.whisper_models())
                    or (self.name == catalog.BUNDLED_WHISPER
                        and catalog.bundled_whisper_parts() is not None))
        return any(v.name == self.name for v in catalog.voices())

    def fits(self, ram_free: int) -> tuple[str, str]:
        """(verdict, sentence): "fits", "tight" or "won't fit" in `ram_free` bytes of RAM."""
        need = describe_size(self.memory)
        if ram_free <= 0 or self.memory <= ram_free // 2:
            return "fits", f"Needs about {need} of memory."
        if self.memory <= ram_free:
            return "tight", f"Needs about {need}; {describe_size(ram_free)} is free now."
        return "won't fit", (f"Needs about {need} but only {describe_size(ram_free)} is free: "
                           "choose a smaller model.")


def _whisper(repo: str, name: str, title: str, size_mb: int, memory_mb: int,
             description: str, files: tuple[str, ...] = _WHISPER_FILES) -> SpeechEntry:
    return SpeechEntry("whisper", repo, name, title, description, size_mb * 1_000_000,
                       memory_mb * 1_000_000, files)


def _voice(path: str, title: str, description: str) -> SpeechEntry:
    """A Piper voice from its folder in rhasspy/piper-voices (lang/locale/speaker/quality)."""
    _lang, locale, speaker, quality = path.split("/")
    name = f"{locale}-{speaker}-{quality}"
    return SpeechEntry("voice", "rhasspy/piper-voices", name, title, description, 63_000_000,
                       150_000_000, (f"{path}/{name}.onnx.json", f"{path}/{name}.onnx"),
                       f"{path}/samples/speaker_0.mp3")


SPEECH_MODELS: tuple[SpeechEntry, ...] = (
    _whisper("Systran/faster-whisper-tiny", "faster-whisper-tiny", "Whisper tiny", 75, 150,
             "The fastest: fine for clear speech in a quiet room."),
    _whisper("Systran/faster-whisper-base", "faster-whisper-base", "Whisper base", 145, 300,
             "Comes with Inglenook: a good balance of speed and accuracy on a laptop."),
    _whisper("Systran/faster-whisper-small", "faster-whisper-small", "Whisper small", 484, 900,
             "More accurate, about three times slower than base."),
    _whisper("Systran/faster-distil-whisper-large-v3", "faster-distil-whisper-large-v3",
             "Distil-Whisper large v3", 1510, 2400,
             "Close to large-v3's accuracy in English, for a machine with memory to spare.",
             _DISTIL_FILES),
    _voice("en/en_US/joe/medium", "Joe (US English)", "Comes with Inglenook."),
    _voice("en/en_US/lessac/medium", "Lessac (US English)", "A clear, even voice."),
    _voice("en/en_GB/alba/medium", "Alba (British English)", "A Scottish English voice."),
    _voice("de/de_DE/thorsten/medium", "Thorsten (German)", "A German voice."),
    _voice("fr/fr_FR/siwis/medium", "Siwis (French)", "A French voice."),
    _voice("es/es_ES/davefx/medium", "Davefx (Spanish)", "A Spanish voice."),
    _voice("it/it_IT/paola/medium", "Paola (Italian)", "An Italian voice."),
)


def fetch_sample(entry: SpeechEntry) -> bytes:
    """A voice's sample from the Hub (a few seconds of mp3, at most MAX_SAMPLE_BYTES), in
    memory. Raises hub.HubError (HubOffline before any connection). Run off the GUI thread."""
    import httpx2

    from inglenook.models import hub
    from inglenook.models.transfer import SMALL_ANSWER_HEADERS, BodyRefused, read_bounded

    url = hub.file_url(entry.repo, entry.sample, "main")
    what = f"The sample of {entry.title}"
    with hub.client() as c, c.deadline(SAMPLE_SECONDS) as watchdog:
        try:
            with c.stream("GET", url, headers=SMALL_ANSWER_HEADERS) as response:
                if response.status_code >= 400:
                    raise hub.status_error(response, what, entry.repo)
                data = read_bounded(response, MAX_SAMPLE_BYTES)
        except httpx2.RequestError as exc:
            raise (hub.too_slow(url, SAMPLE_SECONDS) if watchdog.fired
                   else hub.request_error(exc, url)) from None
        except BodyRefused as exc:
            raise hub.HubError(f"{what}: the answer {exc}; it was not read further.") from None
    if watchdog.fired:
        raise hub.too_slow(url, SAMPLE_SECONDS)
    return data
