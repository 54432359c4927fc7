"""The AlexNet chapter's model code (booktools.generated.alexnet, exported from the chapter) and its tools."""

import pytest
import torch
from torch import nn

from booktools.generated import alexnet as ax


def test_class_hierarchy_comes_from_the_mro():
    edges = ax.class_hierarchy([nn.Conv2d, nn.ReLU, nn.BatchNorm2d])
    assert (nn.Conv2d, nn.modules.conv._ConvNd) in edges
    assert (nn.modules.conv._ConvNd, nn.Module) in edges
    assert (nn.ReLU, nn.Module) in edges           # no longer a Threshold
    assert all(base is not object for _, base in edges)
    assert {child for child, _ in edges} >= {nn.Conv2d, nn.ReLU, nn.BatchNorm2d}


def test_draw_class_hierarchy_draws_every_class():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = ax.draw_class_hierarchy([nn.Conv2d, nn.MaxPool2d, nn.Linear])
    labels = {t.get_text() for t in axes.texts if t.get_text()}  # arrows are empty annotations
    assert labels == {"Module", "_ConvNd", "Conv2d", "_MaxPoolNd", "MaxPool2d", "Linear"}
    plt.close(axes.figure)


def test_profiler_shows_the_convolution_chain():
    conv = nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2)
    calls = ax.aten_call_tree(conv, torch.randn(1, 3, 224, 224))
    assert calls == [(0, "aten::conv2d"), (1, "aten::convolution"), (2, "aten::_convolution"),
                     (3, "aten::mkldnn_convolution")]
    double = ax.aten_call_tree(conv.double(), torch.randn(1, 3, 224, 224, dtype=torch.float64))
    names = [name for _, name in double]
    assert "aten::_slow_conv2d_forward" in names
    # the slow kernel copies the bias into its output first: a data-moving op, shown
    assert names[-1] == "aten::copy_" and names.index("aten::_slow_conv2d_forward") < len(names) - 1


def test_conv_cost_divides_by_groups():
    shape = (1, 64, 8, 8)
    dense_params, dense_flops = ax.conv_cost(nn.Conv2d(64, 64, 3, padding=1, bias=False), shape)
    assert dense_flops == 2 * 64 * 64 * 9 * 8 * 8
    for groups in (2, 8, 64):
        params, flops = ax.conv_cost(nn.Conv2d(64, 64, 3, padding=1, groups=groups, bias=False), shape)
        assert params * groups == dense_params
        assert flops * groups == dense_flops


def test_dispatch_table_names_kernels_without_paths():
    table = ax.dispatch_table("aten::cudnn_convolution", ["CPU", "CUDA"])
    assert table["CPU"] == "nothing registered"
    assert table["CUDA"].startswith("kernel, from ") and "/" not in table["CUDA"]


def test_toy_backend_routes_convolution_and_unregisters():
    conv = nn.Conv2d(3, 4, 3)
    x = torch.randn(1, 3, 9, 9)
    log = []
    with torch.no_grad():
        reference = conv(x)
        with ax.toy_backend(log):
            routed = conv(x)
            with pytest.raises(NotImplementedError, match="PrivateUse1"):
                torch.relu(x)
        assert torch.equal(routed, reference)
        assert len(log) == 1 and "weight (4, 3, 3, 3)" in log[0]
        conv(x)  # after the block: the CPU kernel again, nothing logged
    assert len(log) == 1
    assert ax.dispatch_table("aten::convolution", ["PrivateUse1"])["PrivateUse1"].startswith("default backend kernel")


def test_generated_binding_and_yaml_entry():
    code = ax.generated_python_binding("conv2d")
    assert "THPVariable_conv2d" in code and "PythonArgParser" in code and "at::conv2d_symint" in code
    entry = ax.native_functions_entry("convolution")[0]
    assert "aten::" + entry["func"] == str(torch.ops.aten.convolution.default._schema)


def test_call_tree_hides_no_data_moving_operator():
    moving = {"aten::copy_", "aten::clone", "aten::contiguous", "aten::fill_", "aten::zero_", "aten::zeros",
              "aten::reshape"}
    assert not moving & ax.BOOKKEEPING_OPS
    # addmm copies the bias into its output: the default tree shows it
    linear = nn.Linear(8, 4)
    calls = [name for _, name in ax.aten_call_tree(linear, torch.randn(2, 8))]
    assert calls[:2] == ["aten::linear", "aten::addmm"] and "aten::copy_" in calls
    # a copy made by contiguous() is shown too, while the view it copies from is hidden
    x = torch.randn(4, 6)
    calls = [name for _, name in ax.aten_call_tree(lambda t: t.t().contiguous(), x)]
    assert "aten::t" not in calls and "aten::contiguous" in calls and "aten::copy_" in calls


def test_im2col_and_gemm_equal_the_convolution():
    import torch.nn.functional as F

    torch.manual_seed(0)
    conv = nn.Conv2d(3, 8, kernel_size=5, stride=2, padding=1).double()
    x = torch.randn(2, 3, 17, 17, dtype=torch.float64)
    columns = F.unfold(x, kernel_size=5, stride=2, padding=1)
    by_gemm = conv.weight.flatten(1) @ columns + conv.bias[:, None]
    with torch.no_grad():
        expected = conv(x)
        assert torch.allclose(by_gemm.view_as(expected), expected, rtol=0, atol=1e-12)


def test_dispatch_table_names_the_registering_file():
    table = ax.dispatch_table("aten::convolution", ["AutogradCPU", "PrivateUse1", "SparseCsrCUDA"])
    assert table["AutogradCPU"].startswith("autograd kernel, from VariableType_")
    assert "/" not in "".join(table.values())


def test_dtype_is_not_a_dispatch_key():
    keys = {str(torch._C._dispatch_keys(torch.ones(2, dtype=dtype)))
            for dtype in (torch.float32, torch.float64, torch.int64, torch.bool)}
    assert len(keys) == 1
    assert "AutogradCPU" in str(torch._C._dispatch_keys(torch.ones(2)))  # even without requires_grad
