import torch.multiprocessing as mp


def main():
    queue = mp.Queue()
    writer = mp.Process(target=write_checkpoints, args=(queue,))  # expect: GL402
    writer.start()
    train(queue)
    queue.put(None)
    writer.join()
