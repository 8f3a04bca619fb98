# Source: https://github.com/choderalab/pinot/issues/23 ("memory leak in pinot.TrainAndTest?"), files
#   pinot/app/experiment.py (whole, module banner comments cut) and the metric functions of
#   pinot/metrics.py, at snapshot 1e48e833a02e9ed68aef0d9fd22a4c45e4bd6a23
# Reported: TrainAndTest / MultipleTrainAndTest take "unexpectedly large memory"; a maintainer
#   suspected that each stored result keeps "not only ... the value ... but also the entire
#   computation graph" and that the values should be extracted.
# Pattern: Test.test evaluates every metric for every recorded state (one per epoch) without
#   torch.no_grad(); each metric returns a loss-like tensor computed from the network over the whole
#   test set, and it is stored in the nested dict results[metric][state_name], which is kept as
#   self.results and returned; MultipleTrainAndTest keeps every experiment's results in a list.
# Label: lines marked `# leak` keep the memory
import torch
import dgl
import copy
import pinot


def _mse(y, y_hat):
    return torch.nn.functional.mse_loss(y, y_hat)


def mse(net, g, y):
    y_hat = net.expectation(g)
    return _mse(y, y_hat)


def _rmse(y, y_hat):
    return torch.sqrt(torch.nn.functional.mse_loss(y, y_hat))


def rmse(net, g, y):
    y_hat = net.expectation(g)
    return _rmse(y, y_hat)


def _r2(y, y_hat):
    ss_tot = (y - y.mean()).pow(2).sum()
    ss_res = (y_hat - y).pow(2).sum()
    return 1 - torch.div(ss_res, ss_tot)


def r2(net, g, y):
    y_hat = net.expectation(g)
    return _r2(y, y_hat)

def avg_nll(net, g, y):
    return net.loss(g, y).mean()


class Train:
    """ Training experiment.

    Attributes
    ----------
    data : generator
        training data
    net : `pinot.Net` object
        model with parameters to be trained
    record_interval: int, default=1
        interval at which `states` are being recorded
    optimizer : `torch.optim.Optimizer` object, default=`torch.optim.Adam(1e-5)`
        optimizer used for training
    n_epochs : int, default=100
        number of epochs


    """

    def __init__(self, net, data, optimizer, n_epochs=100, record_interval=1):

        self.data = data
        self.optimizer = optimizer
        self.n_epochs = n_epochs
        self.net = net
        self.record_interval = record_interval
        self.states = {}

    def train_once(self):
        """ Train the model for one batch.
        """
        for g, y in self.data:

            def l():
                loss = torch.sum(self.net.loss(g, y))
                self.optimizer.zero_grad()
                loss.backward()
                return loss

            self.optimizer.step(l)

    def train(self):
        """ Train the model for multiple steps and
        record the weights once every
        `record_interval`.

        """

        for epoch_idx in range(self.n_epochs):
            self.train_once()

            if epoch_idx % self.record_interval == 0:
                self.states[epoch_idx] = copy.deepcopy(self.net.state_dict())

        self.states["final"] = self.net.state_dict()

        return self.net


class Test:
    """ Run sequences of test on a trained model.

    Attributes
    ----------
    net : `pinot.Net` object
        trained model to be tested
    data : `pinot.data` object
        test data
    metrics : list of `pinot.metrics` functions
        metrics used for testing
    states : dictionary
        nested dictionary of state dicts


    """

    def __init__(self, net, data, states, metrics=[pinot.rmse, pinot.r2]):
        self.net = copy.deepcopy(net)  # deepcopy the model object
        self.data = data
        self.metrics = metrics
        self.states = states

    def test(self):
        # initialize an empty dict for each metrics
        results = {}

        for metric in self.metrics:
            results[metric.__name__] = {}

        for state_name, state in self.states.items():  # loop through states
            self.net.load_state_dict(state)

            # concat y and y_hat in test set
            y = []
            g = []
            for g_, y_ in self.data:
                y.append(y_)
                g += dgl.unbatch(g_)

            if y[0].dim() == 0:
                y = torch.stack(y)
            else:
                y = torch.cat(y)

            g = dgl.batch(g)

            for metric in self.metrics:  # loop through the metrics
                results[metric.__name__][state_name] = metric(self.net, g, y)  # leak

        self.results = results
        return self.results

class TrainAndTest:
    """ Train a model and then test it.

    """

    def __init__(
        self,
        net,
        data_tr,
        data_te,
        optimizer,
        metrics=[pinot.rmse, pinot.r2, pinot.avg_nll],
        n_epochs=100,
        record_interval=1,
    ):
        self.net = net  # deepcopy the model object
        self.data_tr = data_tr
        self.data_te = data_te
        self.metrics = metrics
        self.optimizer = optimizer
        self.n_epochs = n_epochs
        self.record_interval = record_interval

    def __str__(self):
        _str = ''
        _str += '# model'
        _str += '\n'
        _str += str(self.net)
        _str += '\n'
        _str += '# optimizer'
        _str += '\n'
        _str += str(self.optimizer)
        _str += '\n'
        _str += '# n_epochs'
        _str += '\n'
        _str += str(self.n_epochs)
        _str += '\n'
        return _str
        

    def run(self):
        train = Train(
            net=self.net,
            data=self.data_tr,
            optimizer=self.optimizer,
            n_epochs=self.n_epochs,
        )

        train.train()

        self.states = train.states

        test = Test(
            net=self.net, data=self.data_te, metrics=self.metrics, states=self.states
        )

        test.test()

        self.results_te = test.results

        test = Test(
            net=self.net, data=self.data_tr, metrics=self.metrics, states=self.states
        )

        test.test()

        self.results_tr = test.results

        return {'test': self.results_te, 'training': self.results_tr}

class MultipleTrainAndTest:
    """ A sequence of controlled experiment.

    
    """

    def __init__(self, experiment_generating_fn, param_dicts):
        self.experiment_generating_fn = experiment_generating_fn
        self.param_dicts = param_dicts
    
    def run(self):
        results = []

        for param_dict in self.param_dicts:
            train_and_test = self.experiment_generating_fn(param_dict)
            result = train_and_test.run()
            results.append((param_dict, result))

        self.results = results

        return self.results



