import multiprocessing as mp
import torch


def worker(queue):
    while True:
        item = queue.get()
        if item is None:
            break


def main():
    model = build_model().cuda()
    queue = mp.Queue()
    p = mp.Process(target=worker, args=(queue,))  # expect: GL401
    p.start()
    try:
        train(model, queue)
    finally:
        queue.put(None)
        p.join()


if __name__ == "__main__":
    main()
