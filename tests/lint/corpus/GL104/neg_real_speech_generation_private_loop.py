# Shape of huggingface/transformers@e8c4f0b738db7caa9eb142c960a8d310c199c306:src/transformers/models/speecht5/modeling_speecht5.py
# (_generate_speech and SpeechT5ForTextToSpeech.generate_speech), shortened. Clean: the
# private decoding loop is only called from generate_speech, which runs under
# @torch.no_grad(): the cache fed back and the attentions collected carry no graph.
import torch
from torch import nn


def _generate_speech(model, input_values, maxlen, output_cross_attentions=False):
    encoder_out = model.speecht5.encoder(input_values=input_values)
    past_key_values = None
    spectrogram = []
    cross_attentions = []
    idx = 0
    while True:
        idx += 1
        decoder_hidden_states = model.speecht5.decoder.prenet(spectrogram)
        decoder_out = model.speecht5.decoder.wrapped_decoder(
            hidden_states=decoder_hidden_states,
            encoder_hidden_states=encoder_out,
            past_key_values=past_key_values,
            use_cache=True,
            output_attentions=output_cross_attentions,
        )
        if output_cross_attentions:
            cross_attentions.append(torch.cat(decoder_out.cross_attentions, dim=0))
        last_decoder_output = decoder_out.last_hidden_state.squeeze(1)
        past_key_values = decoder_out.past_key_values
        spectrum = model.speech_decoder_postnet.feat_out(last_decoder_output)
        spectrogram.append(spectrum)
        if idx >= maxlen:
            break
    return spectrogram, cross_attentions


class SpeechT5ForTextToSpeech(nn.Module):
    @torch.no_grad()
    def generate_speech(self, input_ids, maxlen=20):
        return _generate_speech(self, input_ids, maxlen)
