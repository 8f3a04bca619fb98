import torch.multiprocessing as mp


def main():
    queue = mp.Queue()
    writer = mp.Process(target=write_checkpoints, args=(queue,))
    writer.start()
    try:
        train(queue)
    finally:
        writer.terminate()
        writer.join()
