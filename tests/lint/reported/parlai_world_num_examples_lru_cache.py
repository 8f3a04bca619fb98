# Source: https://github.com/facebookresearch/ParlAI/pull/2487
# Reported: "When working with models that barely fit on the GPU, we can easily OOM when we load
#   up the final validation model. The memory of the agent was not clearing correctly. This
#   insidious bug was due to `lru_cache` keeping a copy of the the world in memory, and therefore
#   the agent, and therefore the model." The fix caches the count on the instance instead.
# Pattern: functools.lru_cache on a method: `self` is part of the key, so the class-level cache
#   keeps the last world (its agent and the agent's model on the GPU) after training is done.
# Label: the line marked `# leak` keeps the memory (the method cache).
from functools import lru_cache


class BatchWorld:
    def __init__(self, opt, world):
        self.opt = opt
        self.world = world
        self.worlds = [world.clone() for _ in range(opt["batchsize"])]

    def num_examples(self):
        return self.world.num_examples()


class DynamicBatchWorld:
    def __init__(self, opt, world):
        self.opt = opt
        self.inner_world = world
        self.agent = world.get_agents()[1]

    def getID(self):
        return self.inner_world.getID()

    @lru_cache(maxsize=1)  # leak
    def num_examples(self):
        """Return the number of examples."""
        return self.inner_world.num_examples()

    def parley(self):
        self.inner_world.parley()


def train_then_validate(opt, create_task, create_agent, load_validation_model):
    agent = create_agent(opt)
    world = DynamicBatchWorld(opt, create_task(opt, agent))
    while world.num_examples() > 0 and not world.inner_world.epoch_done():
        world.parley()
    del world, agent
    valid_agent = load_validation_model(opt)  # OOM: the training world is still cached
    return valid_agent
