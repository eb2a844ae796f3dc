"""Speech to text (faster-whisper) and text to speech (Piper), Qt-free: audio.py decodes and
encodes with bounds, stt.py transcribes, tts.py speaks, sentences.py picks what of a reply is
read aloud, catalog.py finds the installed models, formats.py writes transcripts out.
Microphones and speakers are the window's (ui/)."""
