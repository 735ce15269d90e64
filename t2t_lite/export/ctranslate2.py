"""CTranslate2 export: a trained Transformer as a CTranslate2 model directory.

CTranslate2 is the fastest CPU engine for Transformers but has no converter for this model, so
the model is described here, weight by weight, with CTranslate2's spec API. Every detail is
carried over explicitly: post-norm (or pre-norm with final norms), the one embedding matrix
scaled by sqrt(d_model) and reused as the output projection, bias-free attention projections,
the layer-norm epsilon, keras_hub's interleaved sin/cos position table (given as an explicit
table, since CTranslate2's own is laid out differently), PAD as the decoder's start symbol and
EOS appended to every source.

The directory holds model.bin, config.json, shared_vocabulary.json (the token of each id, so
token <-> id is the identity) and, for a SentencePiece vocabulary, sentencepiece.model.
"""

import contextlib
import json
import logging
import os
import shutil

import numpy as np

from t2t_lite.config import EOS_ID, PAD_ID, UNK_ID
from t2t_lite.decoding.alignment import default_layer
from t2t_lite.decoding.ctranslate2_translator import check_quantization, import_ctranslate2
from t2t_lite.export.versions import new_version
from t2t_lite.model_dir import CHECKPOINT_MARKERS
from t2t_lite.training.checkpoint_list import CheckpointGone
from t2t_lite.utils.errors import UserError
from t2t_lite.utils.files import (
    file_crc32,
    locked_temporary_directory,
    remove_stale_temporaries,
    write_bytes_atomically,
    write_refusals_named,
)

logger = logging.getLogger("t2t_lite")

SENTENCEPIECE_FILE = "sentencepiece.model"
MIN_POSITIONS = 1024  # rows of the position table, at least; outputs may not reach beyond
# In the cached conversions' names: a conversion of an older t2t_lite (2: the alignment layer
# added; 3: with CHECKSUMS) is converted anew.
CONVERSION_VERSION = 3
# In a cached conversion: the CRC-32 of each of its files, checked before it is used (a cache
# damaged in place gave other translations, or a RuntimeError, and was never made again).
CHECKSUMS = "t2t_lite_checksums.json"


def num_positions(hparams):
    """Rows of the exported position table: the longest input plus extra_length."""
    return max(MIN_POSITIONS, hparams.max_length + hparams.extra_length)


def transformer_spec(model, tokens):
    """The CTranslate2 TransformerSpec of `model` (a t2t_lite Transformer), with `tokens`
    (the string of each id) as its shared vocabulary."""
    from ctranslate2.specs import TransformerSpec

    hparams = model.hparams
    pre_norm = hparams.norm_position == "pre"
    spec = TransformerSpec.from_config(
        (hparams.num_encoder_layers, hparams.num_decoder_layers), hparams.num_heads,
        pre_norm=pre_norm, alignment_layer=default_layer(hparams.num_decoder_layers),
        alignment_heads=hparams.num_heads)  # return_attention: all heads of the layer aligned
    spec.config.layer_norm_epsilon = hparams.layer_norm_epsilon
    spec.config.add_source_eos = True
    spec.config.decoder_start_token = spec.config.bos_token = tokens[PAD_ID]
    spec.config.eos_token = tokens[EOS_ID]
    # A symbol vocabulary has no UNK: PAD stands in, a token CTranslate2 never outputs here.
    spec.config.unk_token = tokens[UNK_ID] if tokens[UNK_ID] == "<unk>" else tokens[PAD_ID]

    embeddings = _array(model.embedding.embeddings)
    positions = _array(model.position_encoding(
        np.zeros((1, num_positions(hparams), hparams.d_model), "float32")))[0]
    spec.encoder.embeddings[0].weight = embeddings
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.projection.weight = embeddings
    for side, layers, final_norm in ((spec.encoder, model.encoder_layers, model.encoder_norm),
                                     (spec.decoder, model.decoder_layers, model.decoder_norm)):
        side.scale_embeddings = True
        side.position_encodings.encodings = positions
        if pre_norm:
            _set_norm(side.layer_norm, final_norm)
        for layer_spec, layer in zip(side.layer, layers):
            _set_attention(layer_spec.self_attention, layer.self_attention,
                           layer.self_attention_norm, self_attention=True)
            if hasattr(layer, "cross_attention"):
                _set_attention(layer_spec.attention, layer.cross_attention,
                               layer.cross_attention_norm, self_attention=False)
            _set_norm(layer_spec.ffn.layer_norm, layer.feed_forward_norm)
            _set_dense(layer_spec.ffn.linear_0, layer.feed_forward.hidden)
            _set_dense(layer_spec.ffn.linear_1, layer.feed_forward.projection)
    spec.register_source_vocabulary(tokens)
    spec.register_target_vocabulary(tokens)
    return spec


def _array(variable):
    return np.asarray(variable, dtype="float32")


def _kernel(dense):
    """A Keras Dense kernel [in, out] as CTranslate2's weight [out, in]."""
    return np.ascontiguousarray(_array(dense.kernel).T)


def _set_dense(spec, dense):
    spec.weight = _kernel(dense)
    if dense.use_bias:
        spec.bias = _array(dense.bias)


def _set_norm(spec, norm):
    spec.gamma, spec.beta = _array(norm.gamma), _array(norm.beta)


def _set_attention(spec, attention, norm, self_attention):
    """CTranslate2 fuses the projections: [query; key; value] in self-attention, the query and
    [key; value] in cross-attention; none has a bias."""
    _set_norm(spec.layer_norm, norm)
    query, key, value = map(_kernel, (attention.query, attention.key, attention.value))
    if self_attention:
        spec.linear[0].weight = np.concatenate([query, key, value])
    else:
        spec.linear[0].weight = query
        spec.linear[1].weight = np.concatenate([key, value])
    spec.linear[-1].weight = _kernel(attention.output_projection)


def save(model, vocabulary, path, quantization="float32"):
    """Writes the CTranslate2 model of `model` and `vocabulary` into the new directory `path`."""
    check_quantization(quantization)
    import_ctranslate2()
    spec = transformer_spec(model, vocabulary.tokens())
    spec.validate()
    spec.optimize(quantization=quantization)
    os.makedirs(path)
    spec.save(path)
    model_proto = getattr(vocabulary, "model_proto", None)
    if model_proto is not None:
        write_bytes_atomically(os.path.join(path, SENTENCEPIECE_FILE), model_proto)


def export(model, vocabulary, export_dir, quantization="float32"):
    """Writes `model` and `vocabulary` as a new numbered version of export_dir; returns its
    path."""
    check_quantization(quantization)
    import_ctranslate2()
    return new_version(export_dir, lambda path: save(model, vocabulary, path, quantization))


def cached_conversion(model_dir, checkpoint, load_model, vocabulary):
    """The float32 CTranslate2 model of `checkpoint` of the ModelDir model_dir, converted from
    `load_model()` on first use and kept in MODEL_DIR/ctranslate2/CHECKPOINT_NAME, so a newer
    checkpoint is converted anew (and older conversions removed). Quantization is applied when
    loading."""
    import_ctranslate2()
    cache_dir = model_dir.ctranslate2_cache
    if os.path.islink(cache_dir):  # its other conversions are deleted: never through a link
        raise UserError(f"{cache_dir} is a link to {os.path.realpath(cache_dir)}, where "
                        "t2t_lite would replace what it holds: remove the link (the conversion "
                        "is cached there anew)")
    key = _cache_key(model_dir.path, checkpoint)
    path = os.path.join(cache_dir, key)
    if os.path.lexists(path):  # whole as written (atomically), or damaged since
        directory = os.path.isdir(path) and not os.path.islink(path)
        damage = _damage(path) if directory else "a link or a file, not a directory"
        if not damage:
            logger.info("using the CTranslate2 conversion %s", path)
            return path
        logger.warning("the CTranslate2 conversion %s is damaged (%s): converting again", path,
                       damage)
        if directory:
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)  # a file, or a link: never through it
    model = load_model()
    with contextlib.ExitStack() as stack:
        try:
            os.makedirs(cache_dir, exist_ok=True)
            # Those of decoders killed while converting; never a running one's.
            remove_stale_temporaries(cache_dir, ".tmp-")
            temporary = stack.enter_context(locked_temporary_directory(cache_dir, ".tmp-"))
        except OSError as error:
            raise UserError(f"cannot keep the CTranslate2 conversion in {cache_dir}: "
                            f"{error.strerror}; make it writable, or export with "
                            "t2t-lite-exporter --format=ctranslate2 and load that") from None
        with write_refusals_named("keep the CTranslate2 conversion", cache_dir):
            try:
                save(model, vocabulary, os.path.join(temporary, "model"))
                _write_checksums(os.path.join(temporary, "model"))
                os.replace(os.path.join(temporary, "model"), path)
            except OSError:
                if not os.path.isfile(os.path.join(path, "model.bin")):  # another's is as good
                    raise
    for name in os.listdir(cache_dir):
        if name != key and not name.startswith("."):
            shutil.rmtree(os.path.join(cache_dir, name), ignore_errors=True)
    logger.info("converted %s for CTranslate2 into %s", checkpoint, path)
    return path


def _write_checksums(path):
    sums = {name: file_crc32(os.path.join(path, name)) for name in sorted(os.listdir(path))}
    with open(os.path.join(path, CHECKSUMS), "w", encoding="utf-8") as f:
        json.dump(sums, f)


def _damage(path):
    """What is wrong with the cached conversion at `path`, or None where its files are those
    written (CHECKSUMS)."""
    try:
        with open(os.path.join(path, CHECKSUMS), "rb") as f:
            sums = json.loads(f.read())
        names = set(os.listdir(path)) - {CHECKSUMS}
        if not isinstance(sums, dict) or set(sums) != names:
            return "its files are not those converted"
        for name, crc in sums.items():
            if os.path.islink(os.path.join(path, name)) or file_crc32(
                    os.path.join(path, name)) != crc:
                return f"{name} changed since it was converted"
    except (OSError, ValueError, RecursionError) as error:
        return f"{CHECKSUMS}: {getattr(error, 'strerror', None) or 'not JSON'}"
    return None


def _cache_key(model_dir, checkpoint):
    """A checkpoint's name, qualified by its directory when it is outside model_dir (e.g.
    averaged/ckpt-5), and by its index (or .weights.h5) file's time, so a retrained model_dir
    whose checkpoint numbers repeat is not mistaken for the old one, and by CONVERSION_VERSION,
    so that a conversion an older t2t_lite wrote is not taken for this one's."""
    relative = os.path.relpath(checkpoint, model_dir)
    if relative.startswith(".."):
        relative = os.path.abspath(checkpoint)
    stamps = [os.stat(checkpoint + marker).st_mtime_ns for marker in CHECKPOINT_MARKERS
              if os.path.exists(checkpoint + marker)]
    if not stamps:  # removed since it was chosen: a trainer rotating checkpoints
        raise CheckpointGone(checkpoint)
    stamp = stamps[0]
    return f"{relative.strip(os.sep).replace(os.sep, '_')}-{stamp}-v{CONVERSION_VERSION}"
