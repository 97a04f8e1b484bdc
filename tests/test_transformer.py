"""nn.TransformerEncoderLayer / TransformerEncoder / TransformerDecoderLayer / TransformerDecoder /
Transformer against PyTorch's: torch's state_dict loads
into ours (same names and shapes), and on fresh random inputs both give the same outputs and the
same gradients of the input and of every parameter, on both devices: post- and pre-norm, batch
first or not, relu / gelu / a callable activation, with and without bias, attention and key
padding masks (bool and float), causal masks, unbatched inputs, train mode (dropout 0) and eval."""
import warnings

import numpy as np
import pytest
import torch

import webgrad as wg
from webgrad import nn
from conftest import assert_close, randn, rng
from module_oracle import compare_modules, copy_from_torch
from torch_api import raises_like

D_MODEL, NHEAD, FF, LENGTH, BATCH = 8, 2, 12, 5, 3


def _pair(kwargs, train, device="cpu"):
    """(ours on device, torch's) layer with the same arguments and torch's weights."""
    ours_kwargs, theirs_kwargs = dict(kwargs), dict(kwargs)
    if kwargs.get("activation") == "module":
        ours_kwargs["activation"], theirs_kwargs["activation"] = nn.GELU(approximate="tanh"), \
            torch.nn.GELU(approximate="tanh")
    theirs = torch.nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF, **theirs_kwargs)
    ours = nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF, **ours_kwargs)
    copy_from_torch(ours, theirs)
    return ours.to(device).train(train), theirs.train(train)


def _src(batch_first, batched=True):
    if not batched:
        return randn(LENGTH, D_MODEL)
    return randn(BATCH, LENGTH, D_MODEL) if batch_first else randn(LENGTH, BATCH, D_MODEL)


def _causal(kind):
    mask = np.triu(np.ones((LENGTH, LENGTH), dtype=bool), 1)
    return mask if kind == "bool" else np.where(mask, -np.inf, 0.0).astype(np.float32)


def _padding(kind="bool"):
    """(BATCH, LENGTH): True (or -inf) drops a key; each sample keeps at least its first two."""
    mask = np.zeros((BATCH, LENGTH), dtype=bool)
    for b in range(BATCH):
        mask[b, int(rng().integers(2, LENGTH + 1)):] = True
    return mask if kind == "bool" else np.where(mask, -np.inf, 0.0).astype(np.float32)


# (layer arguments, train mode, masks): each mask kind with each layout and norm placement across the cases
LAYERS = [
    ({"dropout": 0.0}, True, "none"),
    ({"dropout": 0.0}, True, "float-causal+padding"),
    ({"dropout": 0.0, "norm_first": True, "batch_first": True}, True, "bool-causal+padding"),
    ({"activation": "gelu", "batch_first": True}, False, "float-causal+padding"),
    ({"activation": "module", "norm_first": True, "dropout": 0.2}, False, "bool-causal"),
    ({"bias": False, "layer_norm_eps": 1e-3, "dropout": 0.0}, True, "float-causal"),
]


@pytest.mark.parametrize("kwargs,train,masks", LAYERS, ids=lambda v: "-".join(f"{k}={w}" for k, w in v.items())
                         if isinstance(v, dict) else ("train" if v is True else "eval" if v is False else v))
def test_encoder_layer(kwargs, train, masks, device):
    ours, theirs = _pair(kwargs, train, device)
    batch_first = kwargs.get("batch_first", False)
    kind = masks.split("-")[0]
    inputs, names = [_src(batch_first)], []
    if masks != "none":
        inputs.append(_causal(kind))
        names.append("src_mask")
    if "padding" in masks:
        inputs.append(_padding(kind))
        names.append("src_key_padding_mask")

    def call(module, src, *rest):
        return module(src, **dict(zip(names, rest)))
    compare_modules(ours, theirs, device, inputs, call=call, grad_inputs=[True] + [False] * len(names))


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_unbatched_and_is_causal(norm_first, device):
    ours, theirs = _pair({"dropout": 0.0, "norm_first": norm_first}, False, device)
    compare_modules(ours, theirs, device, [_src(False, batched=False)])
    compare_modules(ours, theirs, device, [_src(True), _causal("float")],
                    call=lambda m, src, mask: m(src, src_mask=mask, is_causal=True), grad_inputs=[True, False])


@pytest.mark.parametrize("batch_first,final_norm", [(False, False), (True, True)])
def test_encoder(batch_first, final_norm, device):
    """Two layers (their own weights each) and the optional final norm; a causal mask with and without
    a padding mask, and with the is_causal hint."""
    layer_kwargs = {"dropout": 0.0, "batch_first": batch_first, "norm_first": final_norm}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch's note that nested tensors are off
        theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF, **layer_kwargs), 2,
                                             norm=torch.nn.LayerNorm(D_MODEL) if final_norm else None)
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF, **layer_kwargs), 2,
                                 norm=nn.LayerNorm(D_MODEL) if final_norm else None)
    copy_from_torch(ours, theirs)
    ours.to(device).train(final_norm)
    theirs.train(final_norm)
    compare_modules(ours, theirs, device, [_src(batch_first)])
    compare_modules(ours, theirs, device, [_src(batch_first), _causal("float"), _padding("float")],
                    call=lambda m, src, mask, pad: m(src, mask=mask, src_key_padding_mask=pad),
                    grad_inputs=[True, False, False])
    compare_modules(ours, theirs, device, [_src(batch_first), _causal("float")],
                    call=lambda m, src, mask: m(src, mask=mask, is_causal=True), grad_inputs=[True, False])


@pytest.mark.parametrize("norm_first,batch_first", [(False, False), (True, True)])
def test_decoder_layer(norm_first, batch_first, device):
    kwargs = {"dropout": 0.0, "norm_first": norm_first, "batch_first": batch_first}
    theirs = torch.nn.TransformerDecoderLayer(D_MODEL, NHEAD, FF, **kwargs)
    ours = nn.TransformerDecoderLayer(D_MODEL, NHEAD, FF, **kwargs)
    copy_from_torch(ours, theirs)
    ours.to(device)
    memory = randn(BATCH, LENGTH + 2, D_MODEL) if batch_first else randn(LENGTH + 2, BATCH, D_MODEL)
    padding = np.zeros((BATCH, LENGTH + 2), dtype=bool)
    padding[0, -3:] = True
    compare_modules(ours, theirs, device, [_src(batch_first), memory, _causal("bool"), padding],
                    call=lambda m, tgt, mem, mask, pad: m(tgt, mem, tgt_mask=mask, memory_key_padding_mask=pad),
                    grad_inputs=[True, True, False, False])


@pytest.mark.parametrize("batch_first", [False, True])
def test_transformer(batch_first, device):
    """Encoder and decoder of two layers each, with a causal target mask from
    generate_square_subsequent_mask, in eval mode."""
    kwargs = {"d_model": D_MODEL, "nhead": NHEAD, "num_encoder_layers": 2, "num_decoder_layers": 2,
              "dim_feedforward": FF, "batch_first": batch_first}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.Transformer(**kwargs).eval()
    ours = nn.Transformer(**kwargs)
    copy_from_torch(ours, theirs)
    ours.to(device).eval()
    src = randn(BATCH, LENGTH + 1, D_MODEL) if batch_first else randn(LENGTH + 1, BATCH, D_MODEL)
    mask = nn.Transformer.generate_square_subsequent_mask(LENGTH)
    assert_close(mask, torch.nn.Transformer.generate_square_subsequent_mask(LENGTH))
    compare_modules(ours, theirs, device, [src, _src(batch_first), mask.numpy()],
                    call=lambda m, s, t, tgt_mask: m(s, t, tgt_mask=tgt_mask), grad_inputs=[True, True, False])


def test_transformer_init_is_xavier():
    model = nn.Transformer(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32)
    weight = model.encoder.layers[0].linear1.weight.detach().numpy()   # (32, 16): bound sqrt(6 / 48)
    bound = np.sqrt(6 / 48)
    assert np.abs(weight).max() <= bound and np.abs(weight).max() > 0.8 * bound


def test_state_dict_round_trip_and_copies():
    """Our state_dict loads into torch's encoder; the layers' parameters are copies, not shared."""
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(D_MODEL, NHEAD, FF), 2)
    theirs.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in ours.state_dict().items()})
    first, second = ours.layers[0].linear1.weight, ours.layers[1].linear1.weight
    assert first is not second
    np.testing.assert_array_equal(first.detach().numpy(), second.detach().numpy())   # copies of one layer, as in torch
    with wg.no_grad():
        first.mul_(2.0)
    assert not np.array_equal(first.detach().numpy(), second.detach().numpy())


def test_errors():
    raises_like(lambda: nn.TransformerEncoderLayer(D_MODEL, NHEAD, activation="tanh"),
                lambda: torch.nn.TransformerEncoderLayer(D_MODEL, NHEAD, activation="tanh"))
    raises_like(lambda: nn.TransformerEncoderLayer(D_MODEL, 3), lambda: torch.nn.TransformerEncoderLayer(D_MODEL, 3))
    ours, theirs = _pair({"dropout": 0.0}, False)
    src = _src(False)
    raises_like(lambda: ours(wg.tensor(src), is_causal=True), lambda: theirs(torch.tensor(src), is_causal=True))
