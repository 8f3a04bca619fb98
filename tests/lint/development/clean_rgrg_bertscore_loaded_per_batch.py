# Source: https://github.com/ttanida/rgrg/pull/27 (commit 41f0eaa3f703ea8e27e4e2def706dd49bba6b138 "Fix test set evaluation GPU memory leak"), files src/full_model/evaluate_full_model/evaluate_language_model.py and src/full_model/test_set_evaluation.py (after the fix (with its follow-up commit 9520b6d "Fix get_generated_reports missing parameter"))
# Reported: "the test-set evaluation script has a GPU memory leak. As it iterates through batches for the language model evaluation, GPU memory use keeps climbing from batch to batch ... re-initiating the bertscore evaluation module for each batch ... was what caused this behavior"
# Pattern: get_generated_reports, called once per test batch, loads the BERTScore evaluation module (a model put on the GPU) with evaluate.load("bertscore") on every call; the fix loads it once before the loop and passes it in.
# Label: control (after the fix), no leak line
# From src/full_model/evaluate_full_model/evaluate_language_model.py:
"""
This module contains all functions used to evaluate the language model.

The (main) function evaluate_language_model of this module is called by the function evaluate_model in evaluate_model.py.

evaluate_language_model returns language_model_scores which include:
    - METEOR for:
        - all generated sentences
        - generated sentences for each region
        - generated sentences with gt = normal region (i.e. the region was considered normal by the radiologist)
        - generated sentences with gt = abnormal region (i.e. the region was considered abnormal by the radiologist)

    - BLEU 1-4, METEOR, ROUGE-L, CIDEr-D for all generated reports
    - Clinical efficacy metrics for all generated reports:
        - micro-averaged over 5 observations
        - exampled-based averaged over all 14 observations
        - computed for each observation individually

It also calls subfunctions which:
    - save NUM_BATCHES_OF_GENERATED_SENTENCES_TO_SAVE_TO_FILE (see run_configurations.py) batches of generated sentences as a txt file
    (for manual verification what the model generates)
    - save NUM_BATCHES_OF_GENERATED_REPORTS_TO_SAVE_TO_FILE (see run_configurations.py) batches of generated reports as a txt file
    (for manual verification what the model generates)
    - save NUM_IMAGES_TO_PLOT (see run_configurations.py) images to tensorboard where gt and predicted bboxes for every region are depicted,
    as well as the generated sentences (if they exist) and reference sentences for every region
"""
from collections import defaultdict
import csv
import io
import os
import re
import tempfile

import evaluate
import matplotlib.pyplot as plt
import numpy as np
from PIL import Image
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.rouge.rouge import Rouge
import spacy
from sklearn.metrics import accuracy_score, precision_recall_fscore_support
import torch
import torch.nn as nn
from tqdm import tqdm

from src.CheXbert.src.constants import CONDITIONS
from src.CheXbert.src.label import label
from src.CheXbert.src.models.bert_labeler import bert_labeler
from src.dataset.constants import ANATOMICAL_REGIONS
from src.full_model.evaluate_full_model.cider.cider import Cider
from src.full_model.run_configurations import (
    BATCH_SIZE,
    NUM_BEAMS,
    MAX_NUM_TOKENS_GENERATE,
    NUM_BATCHES_OF_GENERATED_SENTENCES_TO_SAVE_TO_FILE,
    NUM_BATCHES_OF_GENERATED_REPORTS_TO_SAVE_TO_FILE,
    NUM_BATCHES_TO_PROCESS_FOR_LANGUAGE_MODEL_EVALUATION,
    NUM_IMAGES_TO_PLOT,
    BERTSCORE_SIMILARITY_THRESHOLD,
)
from src.path_datasets_and_weights import path_chexbert_weights

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
# (... cut)
def get_generated_reports(
    generated_sentences_for_selected_regions,
    selected_regions,
    sentence_tokenizer,
    bertscore_threshold,
    bert_score,
):
    """
    Args:
        generated_sentences_for_selected_regions (List[str]): of length "num_regions_selected_in_batch"
        selected_regions ([batch_size x 29]): boolean array that has exactly "num_regions_selected_in_batch" True values
        sentence_tokenizer: used in remove_duplicate_generated_sentences to separate the generated sentences
        bert_score: instance of the evaluate bert score evaluation module

    Return:
        generated_reports (List[str]): list of length batch_size containing generated reports for every image in batch
        removed_similar_generated_sentences (List[Dict[str, List]): list of length batch_size containing dicts that map from one generated sentence to a list
        of other generated sentences that were removed because they were too similar. Useful for manually verifying if removing similar generated sentences was successful
    """
    def remove_duplicate_generated_sentences(gen_report_single_image, bert_score):
        def check_gen_sent_in_sents_to_be_removed(gen_sent, similar_generated_sents_to_be_removed):
            for lists_of_gen_sents_to_be_removed in similar_generated_sents_to_be_removed.values():
                if gen_sent in lists_of_gen_sents_to_be_removed:
                    return True

            return False

        # since different (closely related) regions can have the same generated sentence, we first remove exact duplicates

        # use sentence tokenizer to separate the generated sentences
        gen_sents_single_image = sentence_tokenizer(gen_report_single_image).sents

        # convert spacy.tokens.span.Span object into str by using .text attribute
        gen_sents_single_image = [sent.text for sent in gen_sents_single_image]

        # remove exact duplicates using a dict as an ordered set
        # note that dicts are insertion ordered as of Python 3.7
        gen_sents_single_image = list(dict.fromkeys(gen_sents_single_image))

        # there can still be generated sentences that are not exact duplicates, but nonetheless very similar
        # e.g. "The cardiomediastinal silhouette is normal." and "The cardiomediastinal silhouette is unremarkable."
        # to remove these "soft" duplicates, we use bertscore

        # similar_generated_sents_to_be_removed maps from one sentence to a list of similar sentences that are to be removed
        similar_generated_sents_to_be_removed = defaultdict(list)

        # TODO:
        # the nested for loops below check each generated sentence with every other generated sentence
        # this is not particularly efficient, since e.g. generated sentences for the region "right lung" most likely
        # will never be similar to generated sentences for the region "abdomen"
        # thus, one could speed up these checks by only checking anatomical regions that are similar to each other

        for i in range(len(gen_sents_single_image)):
            gen_sent_1 = gen_sents_single_image[i]

            for j in range(i + 1, len(gen_sents_single_image)):
                if check_gen_sent_in_sents_to_be_removed(gen_sent_1, similar_generated_sents_to_be_removed):
                    break

                gen_sent_2 = gen_sents_single_image[j]
                if check_gen_sent_in_sents_to_be_removed(gen_sent_2, similar_generated_sents_to_be_removed):
                    continue

                bert_score_result = bert_score.compute(
                    lang="en", predictions=[gen_sent_1], references=[gen_sent_2], model_type="distilbert-base-uncased"
                )

                if bert_score_result["f1"][0] > bertscore_threshold:
                    # remove the generated similar sentence that is shorter
                    if len(gen_sent_1) > len(gen_sent_2):
                        similar_generated_sents_to_be_removed[gen_sent_1].append(gen_sent_2)
                    else:
                        similar_generated_sents_to_be_removed[gen_sent_2].append(gen_sent_1)

        gen_report_single_image = " ".join(
            sent for sent in gen_sents_single_image if not check_gen_sent_in_sents_to_be_removed(sent, similar_generated_sents_to_be_removed)
        )

        return gen_report_single_image, similar_generated_sents_to_be_removed

    generated_reports = []
    removed_similar_generated_sentences = []
    curr_index = 0

    for selected_regions_single_image in selected_regions:
        # sum up all True values for a single row in the array (corresponing to a single image)
        num_selected_regions_single_image = np.sum(selected_regions_single_image)

        # use curr_index and num_selected_regions_single_image to index all generated sentences corresponding to a single image
        gen_sents_single_image = generated_sentences_for_selected_regions[
            curr_index: curr_index + num_selected_regions_single_image
        ]

        # update curr_index for next image
        curr_index += num_selected_regions_single_image

        # concatenate generated sentences of a single image to a continuous string gen_report_single_image
        gen_report_single_image = " ".join(sent for sent in gen_sents_single_image)

        gen_report_single_image, similar_generated_sents_to_be_removed = remove_duplicate_generated_sentences(
            gen_report_single_image, bert_score
        )

        generated_reports.append(gen_report_single_image)
        removed_similar_generated_sentences.append(similar_generated_sents_to_be_removed)

    return generated_reports, removed_similar_generated_sentences

# (... cut)
# From src/full_model/test_set_evaluation.py:
from ast import literal_eval
import logging
import os
import random

import albumentations as A
from albumentations.pytorch import ToTensorV2
import cv2
from datasets import Dataset
import numpy as np
import pandas as pd
import spacy
import torch
import evaluate
from torch.utils.data import DataLoader
import torchmetrics
from tqdm import tqdm

from src.dataset.constants import ANATOMICAL_REGIONS
from src.full_model.custom_collator import CustomCollator
from src.full_model.custom_dataset import CustomDataset
from src.full_model.evaluate_full_model.evaluate_model import (
    update_object_detector_metrics,
    update_region_abnormal_metrics,
    update_region_selection_metrics,
)
from src.full_model.evaluate_full_model.evaluate_language_model import (
    get_ref_sentences_for_selected_regions,
    get_sents_for_normal_abnormal_selected_regions,
    get_generated_reports,
    update_gen_and_ref_sentences_for_regions,
    update_num_generated_sentences_per_image,
    update_gen_sentences_with_corresponding_regions,
    compute_language_model_scores
)
from src.full_model.report_generation_model import ReportGenerationModel
from src.full_model.train_full_model import get_tokenizer
from src.path_datasets_and_weights import path_full_dataset, path_runs_full_model, path_test_set_evaluation_scores_txt_files

# specify the checkpoint you want to evaluate by setting "RUN" and "CHECKPOINT"
RUN = 38
CHECKPOINT = "checkpoint_val_loss_20.850_overall_steps_195284.pt"
BERTSCORE_SIMILARITY_THRESHOLD = 0.9
IMAGE_INPUT_SIZE = 512
BATCH_SIZE = 4
NUM_WORKERS = 10
NUM_BEAMS = 4
MAX_NUM_TOKENS_GENERATE = 300
NUM_BATCHES_OF_GENERATED_SENTENCES_TO_SAVE_TO_FILE = 100
NUM_BATCHES_OF_GENERATED_REPORTS_TO_SAVE_TO_FILE = 100
# (... cut)
def evaluate_language_model_on_test_set(model, test_loader, test_2_loader, tokenizer):
    def iterate_over_test_loader(test_loader):
        # to recover from potential OOMs
        oom = False

        # used in function get_generated_reports
        sentence_tokenizer = spacy.load("en_core_web_trf")
        bert_score = evaluate.load("bertscore")

        with torch.no_grad():
            for num_batch, batch in tqdm(enumerate(test_loader)):

                images = batch["images"]  # shape [batch_size x 1 x 512 x 512]
                region_is_abnormal = batch["region_is_abnormal"].numpy()  # boolean array of shape [batch_size x 29]

                # List[List[str]] that holds the reference phrases. The inner list holds all reference phrases of a single image
                reference_sentences = batch["reference_sentences"]

                # List[str] that holds the reference report for the images in the batch
                reference_reports = batch["reference_reports"]

                try:
                    with torch.autocast(device_type='cuda', dtype=torch.float16):
                        output = model.generate(
                            images.to(device, non_blocking=True),
                            max_length=MAX_NUM_TOKENS_GENERATE,
                            num_beams=NUM_BEAMS,
                            early_stopping=True,
                        )
                except RuntimeError as e:  # out of memory error
                    if "out of memory" in str(e):
                        oom = True

                        with open(final_scores_txt_file, "a") as f:
                            f.write("Generation:\n")
                            f.write(f"OOM at batch number {num_batch}.\n")
                            f.write(f"Error message: {str(e)}\n\n")
                    else:
                        raise e

                if oom:
                    # free up memory
                    torch.cuda.empty_cache()
                    oom = False
                    continue

                # output == -1 if the region features that would have been passed into the language model were empty (see forward method for more details)
                if output == -1:
                    with open(final_scores_txt_file, "a") as f:
                        f.write("Generation:\n")
                        f.write(f"Empty region features before language model at batch number {num_batch}.\n\n")

                    continue
                else:
                    # selected_regions is of shape [batch_size x 29] and is True for regions that should get a sentence
                    beam_search_output, selected_regions, _, _ = output
                    selected_regions = selected_regions.detach().cpu().numpy()

                # generated_sentences_for_selected_regions is a List[str] of length "num_regions_selected_in_batch"
                generated_sents_for_selected_regions = tokenizer.batch_decode(
                    beam_search_output, skip_special_tokens=True, clean_up_tokenization_spaces=True
                )

                # filter reference_sentences to those that correspond to the generated_sentences for the selected regions.
                # reference_sentences_for_selected_regions will therefore be a List[str] of length "num_regions_selected_in_batch"
                # (i.e. same length as generated_sentences_for_selected_regions)
                reference_sents_for_selected_regions = get_ref_sentences_for_selected_regions(
                    reference_sentences, selected_regions
                )

                (
                    gen_sents_for_normal_selected_regions,
                    gen_sents_for_abnormal_selected_regions,
                    ref_sents_for_normal_selected_regions,
                    ref_sents_for_abnormal_selected_regions,
                ) = get_sents_for_normal_abnormal_selected_regions(region_is_abnormal, selected_regions, generated_sents_for_selected_regions, reference_sents_for_selected_regions)

                generated_reports, removed_similar_generated_sentences = get_generated_reports(
                    generated_sents_for_selected_regions,
                    selected_regions,
                    sentence_tokenizer,
                    BERTSCORE_SIMILARITY_THRESHOLD,
                    bert_score,
                )

                gen_and_ref_sentences["generated_sentences"].extend(generated_sents_for_selected_regions)
                gen_and_ref_sentences["generated_sentences_normal_selected_regions"].extend(gen_sents_for_normal_selected_regions)
                gen_and_ref_sentences["generated_sentences_abnormal_selected_regions"].extend(gen_sents_for_abnormal_selected_regions)
                gen_and_ref_sentences["reference_sentences"].extend(reference_sents_for_selected_regions)
                gen_and_ref_sentences["reference_sentences_normal_selected_regions"].extend(ref_sents_for_normal_selected_regions)
                gen_and_ref_sentences["reference_sentences_abnormal_selected_regions"].extend(ref_sents_for_abnormal_selected_regions)
                gen_and_ref_reports["generated_reports"].extend(generated_reports)
                gen_and_ref_reports["reference_reports"].extend(reference_reports)
                gen_and_ref_reports["removed_similar_generated_sentences"].extend(removed_similar_generated_sentences)

                update_gen_and_ref_sentences_for_regions(gen_and_ref_sentences, generated_sents_for_selected_regions, reference_sents_for_selected_regions, selected_regions)
                update_num_generated_sentences_per_image(gen_and_ref_sentences, selected_regions)

                if num_batch < NUM_BATCHES_OF_GENERATED_REPORTS_TO_SAVE_TO_FILE:
                    update_gen_sentences_with_corresponding_regions(gen_sentences_with_corresponding_regions, generated_sents_for_selected_regions, selected_regions)

    # whilst iterating over the validation loader, save the (all, normal, abnormal) generated and reference sentences in the respective lists
    # the list under the key "num_generated_sentences_per_image" will hold integers that represent how many sentences were generated for each image
    # this is useful to be able to get all generated and reference sentences that correspond to the same image
    # (since we append all generated and reference sentences to the "generated_sentences" and "reference_sentences" lists indiscriminately, this information would be lost otherwise)
    gen_and_ref_sentences = {
        "generated_sentences": [],
        "generated_sentences_normal_selected_regions": [],
        "generated_sentences_abnormal_selected_regions": [],
        "reference_sentences": [],
        "reference_sentences_normal_selected_regions": [],
        "reference_sentences_abnormal_selected_regions": [],
        "num_generated_sentences_per_image": []
    }

    # also save the generated and reference sentences on a per region basis
    for region_index, _ in enumerate(ANATOMICAL_REGIONS):
        gen_and_ref_sentences[region_index] = {
            "generated_sentences": [],
            "reference_sentences": []
        }

    # and of course the generated and reference reports, and additionally keep track of the generated sentences
    # that were removed because they were too similar to other generated sentences (only as a sanity-check/for writing to file)
    gen_and_ref_reports = {
        "generated_reports": [],
        "removed_similar_generated_sentences": [],
        "reference_reports": [],
    }

    # gen_sentences_with_corresponding_regions will be a list[list[tuple[str, str]]],
    # where len(outer_list) will be NUM_BATCHES_OF_GENERATED_REPORTS_TO_SAVE_TO_FILE * BATCH_SIZE
    # the inner list will correspond to a single generated report / single image and hold tuples of (region_name, generated_sentence),
    # i.e. each region that was selected for that single image, with the corresponding generated sentence (without any removal of similar generated sentences)
    #
    # gen_sentences_with_corresponding_regions will be used such that each generated sentences in a generated report can be directly attributed to a region
    # because this information gets lost when we concatenated generated sentences
    # this is only used to get more insights into the generated reports that are written to file
    gen_sentences_with_corresponding_regions = []

    log.info("Test loader: generating sentences/reports...")
    iterate_over_test_loader(test_loader)
    log.info("Test loader: generating sentences/reports... DONE.")

    log.info("Test loader 2: generating sentences/reports...")
    iterate_over_test_loader(test_2_loader)
    log.info("Test loader 2: generating sentences/reports... DONE.")

    write_sentences_and_reports_to_file_for_test_set(
        gen_and_ref_sentences,
        gen_and_ref_reports,
        gen_sentences_with_corresponding_regions,
    )

    with open(final_scores_txt_file, "a") as f:
        f.write(f"Num generated reports: {len(gen_and_ref_reports['generated_reports'])}\n")

    log.info("Computing language_model_scores...")
    language_model_scores = compute_language_model_scores(gen_and_ref_sentences, gen_and_ref_reports)
    log.info("Computing language_model_scores... DONE.")

    return language_model_scores
# (... cut)
