import torch
import torch.multiprocessing as mp


def worker(rank):
    torch.cuda.set_device(rank)


def main():
    model = build().cuda()
    p = mp.Process(target=worker, args=(0,))
    p.start()
    try:
        train(model)
    finally:
        p.join()


if __name__ == "__main__":
    mp.set_start_method("spawn")
    main()
