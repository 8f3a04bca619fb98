# Shape of pytorch/vision@01977a187961243eaf66ead246fd92a5c6c7ccfc:torchvision/datasets/kinetics.py
# (Kinetics._download_videos), shortened. Kept: the Pool is never closed or joined, not
# even on success; its workers outlive the call (they only download files, so what they
# keep is processes rather than GPU memory).
from functools import partial
from multiprocessing import Pool

from torch import Tensor


def _dl_wrap(tarpath, videopath, line):
    download_and_extract_archive(line, tarpath, videopath)


class Kinetics:
    def _download_videos(self, list_video_urls, tar_path):
        if self.num_download_workers == 1:
            for line in list_video_urls:
                download_and_extract_archive(line, tar_path, self.split_folder)
        else:
            part = partial(_dl_wrap, tar_path, self.split_folder)
            poolproc = Pool(self.num_download_workers)  # expect: GL402
            poolproc.map(part, list_video_urls)
