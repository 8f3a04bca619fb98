# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/pipelines/audio_classification.py (ffmpeg_read), shortened.
# Clean: the try block only catches a failed start (no child then); communicate() right
# after it waits for the child.
import subprocess

import numpy as np
import torch


def ffmpeg_read(bpayload: bytes, sampling_rate: int) -> np.ndarray:
    ffmpeg_command = ["ffmpeg", "-i", "pipe:0", "-ac", "1", "-ar", f"{sampling_rate}", "-f", "f32le", "pipe:1"]
    try:
        ffmpeg_process = subprocess.Popen(ffmpeg_command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    except FileNotFoundError:
        raise ValueError("ffmpeg was not found but is required to load audio files from filename")
    output_stream = ffmpeg_process.communicate(bpayload)
    audio = np.frombuffer(output_stream[0], np.float32)
    if audio.shape[0] == 0:
        raise ValueError("Malformed soundfile")
    return audio
