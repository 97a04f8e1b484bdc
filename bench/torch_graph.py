"""PyTorch's CUDA-graph replay of a whole training step: the peer the benchmarks set beside wg.jit."""
import torch


def cuda_graph_step(loss_of, opt, batches):
    """loss_of(batch) -> the loss of one batch; batches: a tensor whose rows are the batches (the
    same shape each). Returns step(i): copy batches[i] (cyclically) into the captured input and
    replay the captured forward + backward + optimizer step (PyTorch's recipe: warm up on a side
    stream, gradients set to None; the optimizer made with capturable=True)."""
    static = batches[0].clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(3):
            opt.zero_grad(set_to_none=True)
            loss_of(batches[i % len(batches)]).backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = loss_of(static)
        loss.backward()
        opt.step()

    def step(i):
        static.copy_(batches[i % len(batches)])
        graph.replay()
        return loss
    return step
