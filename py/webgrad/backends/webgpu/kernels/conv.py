"""The convolution kernels: conv2d and its gradients as products whose B operand reads an image's
windows in place (the matmul family's forms), and fold (shaders/fold.wgsl)."""
import functools
import math

from .common import check_gpu_dtype, fill, groups
from .matmul import MatmulOperand, _window_operand, _words_of_4
from .params import ParamBlock, u32


class ConvKernels:
    # Each group's product is one more batch dim (of size 1 without groups): the operands' batch
    # strides step to the group's filters and channels, and the results, (N, groups, rows, pixels),
    # are in the (N, Co, Ho, Wo) layout already.
    def conv2d(self, x, weight, bias, stride, padding, dilation, groups=1):
        """(N, C, H, W) input, (Co, C / groups, kh, kw) contiguous weight, bias (Co) or None (groups
        1 only) -> (N, Co, Ho, Wo)."""
        check_gpu_dtype(x.dtype, "conv2d in")
        n, _, h, w = x.shape
        co, c, kh, kw = weight.shape   # c: the channels of a group
        (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
        ho, wo = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
        k, co = c * kh * kw, co // groups
        rows = MatmulOperand(weight.storage, "strided", True, k % 4 == 0 and _words_of_4(weight.offset),
                             {"offset": weight.offset, "row_stride": k, "col_stride": 1}, [0, co * k])
        windows = _window_operand(x, padding, ((c, kh, kw), (x.strides[1], dh, dw)), ((1, ho, wo), (0, sh, sw)),
                                  [x.strides[0], c * x.strides[1]], along_k=False)
        return self._product(rows, windows, co, ho * wo, k, (n, groups), bias, -2, x.dtype)

    def conv2d_input_grad(self, grad, weight, in_shape, padding, dilation, groups=1):
        """The input's gradient of a stride-1 conv2d: grad (N, Co, Ho, Wo) through the flipped kernel
        (the windows of grad, walked backwards), weight (Co, C / groups, kh, kw) contiguous -> (N, C, H, W)."""
        n, _, h, w = in_shape
        co, c, kh, kw = weight.shape
        co //= groups
        weight_t = MatmulOperand(weight.storage, ("split_k", kh * kw), True, False,
                                 {"offset": weight.offset, "row_stride": kh * kw, "k1_stride": c * kh * kw,
                                  "k2_stride": 1}, [0, co * c * kh * kw])
        windows = _window_operand(grad, (-padding[0], -padding[1]),
                                  ((co, kh, kw), (grad.strides[1], -dilation[0], -dilation[1])),
                                  ((1, h, w), (0, 1, 1)), [grad.strides[0], co * grad.strides[1]], along_k=False)
        return self._product(weight_t, windows, c, h * w, co * kh * kw, (n, groups), None, -1, grad.dtype)

    def conv2d_weight_grad(self, grad, x, kernel, stride, padding, dilation, groups=1):
        """The weight's gradient: grad (N, Co, Ho, Wo) contiguous times x's windows, summed over the
        batch and the output pixels -> (Co, C / groups * kh * kw)."""
        n, co, ho, wo = grad.shape
        c = x.shape[1] // groups
        grad_rows = MatmulOperand(grad.storage, ("split_k", ho * wo), True, False,
                                  {"offset": grad.offset, "row_stride": ho * wo, "k1_stride": co * ho * wo,
                                   "k2_stride": 1}, [co // groups * ho * wo])
        windows = _window_operand(x, padding, ((n, ho, wo), (x.strides[0], stride[0], stride[1])),
                                  ((c, *kernel), (x.strides[1], dilation[0], dilation[1])),
                                  [c * x.strides[1]], along_k=True)
        return self._product(grad_rows, windows, co // groups, c * kernel[0] * kernel[1], n * ho * wo, (groups,),
                             None, -1, grad.dtype)


    def fold(self, g, shape, kernel, stride, dilation, padding=(0, 0)):
        """Sum the sliding-window view g (N, C, kh, kw, Ho, Wo) of an (N, C, H, W) input, padded by
        `padding` on each side, back into that input's shape."""
        check_gpu_dtype(g.dtype, "fold of")
        numel, workgroups, pack = _fold_layout(shape, kernel, stride, dilation, padding, g.shape, g.strides)
        storage = self._empty(shape, g.dtype)
        if numel:
            pipeline = self.runtime.pipeline(("fold",), _fold_source)
            self.runtime.dispatch(pipeline, [storage, g.storage], pack([g.offset]), workgroups)
        return storage


# fold's parameters (their meanings: shaders/fold.wgsl). g's offset changes from call to call, so it
# comes last (ParamBlock.packer).
FOLD_PARAMS = ParamBlock(u32("numel"), u32("channels"), u32("height"), u32("width"), u32("kernel", 2),
                         u32("windows", 2), u32("stride", 2), u32("dilation", 2), u32("padding", 2),
                         u32("g_strides", 6), u32("g_offset", 1))
# Fold layouts kept worked out (_fold_layout); past this many the oldest go.
FOLD_LAYOUTS_KEPT = 256


@functools.lru_cache(maxsize=FOLD_LAYOUTS_KEPT)
def _fold_layout(shape, kernel, stride, dilation, padding, g_shape, g_strides):
    """One layout's outputs and workgroups, and FOLD_PARAMS as a function of [g's offset]."""
    numel = math.prod(shape)
    return numel, groups(numel), FOLD_PARAMS.packer(
        numel=numel, channels=shape[1], height=shape[2], width=shape[3], kernel=kernel, windows=g_shape[4:],
        stride=stride, dilation=dilation, padding=padding, g_strides=g_strides)


def _fold_source():
    return fill("fold", FOLD_PARAMS)
