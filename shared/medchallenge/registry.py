"""Every challenge, defined once: its name and the spellings derived from it, its scoring configurations (one
evaluator image each), its grand-challenge sockets, its compose services, generator, evaluator and algorithm.

The command line, the synthetic-data generators, `make demo`, the grand-challenge emulator and packer, the
benchmarks and the end-to-end tests read this table. compose.yaml is written by hand for people to read;
tests/test_registry.py holds it against this table.

From a challenge's one name (`tb-caverns`) derive its module name (`tb_caverns`: `medchallenge.evaluators.tb_caverns`,
`medchallenge.synth.tb_caverns`, `evaluators/tb_caverns/`), the prefix of its folder variables (`TB_CAVERNS_`) and
its demo folder (`demo/tb_caverns/`). A configuration other than the default adds its suffix to each
(`ribfrac-legacy-evaluator`, `RIBFRAC_LEGACY_`).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from .contract import EVALUATOR_IMAGES
from .platforms.submissions import SubmissionFormat
from .sockets import CAPTION_INTERFACE, OBJECT_CXR_INTERFACE, RIBFRAC_INTERFACE, TB_CAVERNS_INTERFACE, Interface

IMAGE_NAMESPACE = "medchallenge"
DEMO_ROOT = "./demo"
GROUND_TRUTH_TARGET = "/opt/ml/input/data/ground_truth"
MODEL_TARGET = "/opt/ml/model"


def _joined(*parts: str) -> str:
    return "-".join(part for part in parts if part)


def _variable_prefix(name: str) -> str:
    return name.upper().replace("-", "_")


@dataclass(frozen=True)
class Mount:
    """A folder of a compose service: the host folder is `$variable`, else `default`; `role` says what it holds
    (input, predictions, ground_truth, images, metrics, model)."""

    role: str
    variable: str
    default: str
    target: str

    @property
    def volume(self) -> str:
        """The volume as compose.yaml writes it."""
        return f"${{{self.variable}:-{self.default}}}:{self.target}"


@dataclass(frozen=True)
class Service:
    """A docker compose service: its image (without tag), how it is built, its folders, what runs before it."""

    name: str
    image: str
    dockerfile: str
    mounts: tuple[Mount, ...]
    build_args: Mapping[str, str] = field(default_factory=dict)
    depends_on: str | None = None

    def mount(self, role: str) -> Mount:
        return next(m for m in self.mounts if m.role == role)

    def environment(self, **folders: str) -> dict[str, str]:
        """The folder variables that point this service's folders of the given roles at `folders`."""
        return {self.mount(role).variable: str(path) for role, path in folders.items()}


@dataclass(frozen=True)
class Algorithm:
    """A challenge's algorithm image: the module holding its runner plug-in (`ALGORITHM`, see algorithms/runner.py)."""

    module: str
    description: str  # the image's description label
    # the medchallenge extras its image installs (onnx: the CPU runtime; dicom: DICOM studies in, SR/SEG out)
    extras: tuple[str, ...] = ("ct", "onnx", "dicom")
    # the `python -m medchallenge.synth` command writing its input files with their ground truth (module
    # medchallenge.synth.<generator with _>); "" where the challenge's own generator does
    generator: str = ""
    # that generator's arguments for `make demo` and the end-to-end tests where the challenge's (demo_size,
    # test_size, which its own generator also takes) do not fit it
    demo_size: tuple[str, ...] = ()
    test_size: tuple[str, ...] = ()
    # its model card's operating point per output socket carrying probabilities (its README, "Model card"): the
    # threshold at which the gateway and its DICOM writers call a finding (dicom.sr.OperatingPoint)
    operating_points: tuple[tuple[str, float], ...] = ()

    @property
    def generator_module(self) -> str:
        return f"medchallenge.synth.{self.generator.replace('-', '_')}"

    def plugin(self):
        """The `algorithms.runner.Algorithm` of this challenge (model class, case patterns, writers)."""
        return importlib.import_module(self.module).ALGORITHM


@dataclass(frozen=True)
class Edition:
    """A scoring configuration of a challenge's evaluator, built as its own image. `build_args` bake the option in
    (the image's environment, which the evaluator reads as the option's default), so that grand-challenge, which
    runs a container with no arguments and no environment, scores that way."""

    suffix: str = ""  # "" for the default configuration; names get "-<suffix>"
    build_args: Mapping[str, str] = field(default_factory=dict)
    synth_arguments: tuple[str, ...] = ()  # generator arguments for its data
    shares_data: bool = False  # scores the default configuration's folders, with metrics in metrics-<suffix>


@dataclass(frozen=True)
class Challenge:
    """One challenge: `name` is its one spelling, every other is derived (module, variable prefix, folders)."""

    name: str
    title: str
    interface: Interface
    demo_size: tuple[str, ...]  # generator arguments for `make demo`
    test_size: tuple[str, ...]  # and for the end-to-end tests
    evaluator_description: str  # the evaluator image's description label
    evaluator_extras: tuple[str, ...]  # the medchallenge extras the evaluator image installs
    editions: tuple[Edition, ...] = (Edition(),)
    algorithm: Algorithm | None = None
    short_name: str = ""  # where services, variables and demo folders use a shorter stem than `name`
    # what a participant uploads on AIcrowd or Codabench (medchallenge.platforms), one format per task
    submissions: tuple[SubmissionFormat, ...] = ()

    @property
    def module(self) -> str:
        """`tb_caverns`: the module of its evaluator, generator and formats, and its folders in the repository."""
        return self.name.replace("-", "_")

    @property
    def evaluator_module(self) -> str:
        return f"medchallenge.evaluators.{self.module}"

    @property
    def generator_module(self) -> str:
        return f"medchallenge.synth.{self.module}"

    @property
    def input_generator(self) -> str:
        """The synth command whose data an end-to-end run starts from: the algorithm's inputs where it has one."""
        return (self.algorithm.generator if self.algorithm else "") or self.name

    def input_generator_size(self, demo: bool) -> tuple[str, ...]:
        """The input generator's arguments for `make demo` (`demo`) or the end-to-end tests."""
        own = (self.algorithm.demo_size if demo else self.algorithm.test_size) if self.algorithm else ()
        return own or (self.demo_size if demo else self.test_size)

    @property
    def configurations(self) -> tuple[Configuration, ...]:
        return tuple(Configuration(self, edition) for edition in self.editions)

    @property
    def default(self) -> Configuration:
        """The configuration whose data folders the others share."""
        return self.configurations[0]

    @property
    def configurations_with_data(self) -> tuple[Configuration, ...]:
        return tuple(c for c in self.configurations if not c.edition.shares_data)

    @property
    def algorithm_editions(self) -> bool:
        """Whether its algorithm runs once per configuration with data, the option baked into one image each (as
        the caption editions' captions differ); otherwise one algorithm image serves every configuration."""
        return self.algorithm is not None and len(self.configurations_with_data) > 1

    @property
    def algorithm_service(self) -> Service | None:
        """The algorithm service of the default configuration (the one grand-challenge emulation runs)."""
        return self.default.algorithm_service


@dataclass(frozen=True)
class Configuration:
    """A challenge with one of its editions: the names, folders and compose service of that evaluator image."""

    challenge: Challenge
    edition: Edition

    @property
    def name(self) -> str:
        """`imageclef-caption-2022`: its image and its grand-challenge package are named after it."""
        return _joined(self.challenge.name, self.edition.suffix)

    @property
    def stem(self) -> str:
        """`caption-2022`: the stem of its compose service, folder variables and demo folder."""
        return _joined(self.challenge.short_name or self.challenge.name, self.edition.suffix)

    @property
    def title(self) -> str:
        return " ".join(filter(None, (self.challenge.title, self.edition.suffix)))

    @property
    def variable_prefix(self) -> str:
        return _variable_prefix(self.stem)

    @property
    def data(self) -> Configuration:
        """The configuration whose folders it scores: itself, or the challenge's default where it shares them."""
        return self.challenge.default if self.edition.shares_data else self

    @property
    def demo_folder(self) -> str:
        return self.data.stem.replace("-", "_")

    @property
    def algorithm_service(self) -> Service | None:
        """The algorithm service whose predictions this configuration scores (the data configuration's)."""
        challenge, data = self.challenge, self.data
        if challenge.algorithm is None:
            return None
        if data != self:
            return data.algorithm_service
        prefix, folder = data.variable_prefix, f"{DEMO_ROOT}/{data.demo_folder}"
        name = self.name if challenge.algorithm_editions else challenge.name
        return Service(
            name=f"{self.stem if challenge.algorithm_editions else challenge.name}-algorithm",
            image=f"{IMAGE_NAMESPACE}/{name}-algorithm",
            dockerfile=f"algorithms/{challenge.module}/Dockerfile",
            mounts=(Mount("input", f"{prefix}_INPUT", f"{folder}/input", "/input:ro"),
                    Mount("predictions", f"{prefix}_PREDICTIONS", f"{folder}/predictions", "/output"),
                    Mount("model", f"{prefix}_MODEL", f"./algorithms/{challenge.module}/model",
                          f"{MODEL_TARGET}:ro")),
            build_args=({**self.edition.build_args, "IMAGE_TITLE": f"{IMAGE_NAMESPACE}-{name}-algorithm"}
                        if challenge.algorithm_editions else {}),
        )

    @property
    def service(self) -> Service:
        data = self.data
        folder = f"{DEMO_ROOT}/{self.demo_folder}"
        metrics = _joined("metrics", self.edition.suffix if self.edition.shares_data else "")
        algorithm = self.algorithm_service
        return Service(
            name=f"{self.stem}-evaluator",
            image=f"{IMAGE_NAMESPACE}/{self.name}-evaluator",
            dockerfile=f"evaluators/{self.challenge.module}/Dockerfile",
            mounts=(Mount("predictions", f"{data.variable_prefix}_PREDICTIONS", f"{folder}/predictions", "/input:ro"),
                    Mount("ground_truth", f"{data.variable_prefix}_GROUND_TRUTH", f"{folder}/ground_truth",
                          f"{GROUND_TRUTH_TARGET}:ro"),
                    # the test images (the algorithm's input, the same variable) for review.html
                    Mount("images", f"{data.variable_prefix}_INPUT", f"{folder}/input", f"{EVALUATOR_IMAGES}:ro"),
                    Mount("metrics", f"{self.variable_prefix}_METRICS", f"{folder}/{metrics}", "/output")),
            build_args=({**self.edition.build_args, "IMAGE_TITLE": f"{IMAGE_NAMESPACE}-{self.name}-evaluator"}
                        if self.edition.build_args else {}),
            depends_on=algorithm.name if algorithm else None,
        )


CHALLENGES: dict[str, Challenge] = {challenge.name: challenge for challenge in (
    Challenge(
        "tb-caverns", "ImageCLEF 2022 TB caverns", TB_CAVERNS_INTERFACE,
        demo_size=("--cases", "8"), test_size=("--cases", "3", "--shape", "192", "192", "48"),
        evaluator_description="ImageCLEF 2022 TB caverns detection: official mAP over IoU 0.40-0.75",
        evaluator_extras=("ct", "plots"),  # SimpleITK and matplotlib: review.html's figures
        submissions=(SubmissionFormat("", ("submission.txt",), "the official run file, no header, one line per box: "
                                      "`TST_001.nii.gz,X1,Y1,Z1,X2,Y2,Z2` (integer voxel indices, X1<X2, Y1<Y2, "
                                      "Z1<Z2); cases without caverns are left out", "map"),),
        algorithm=Algorithm("medchallenge.algorithms.tb_caverns", "ImageCLEF 2022 TB caverns detection: "
                            "synthetic-data 3-D U-Net (ONNX Runtime), boxes per CT",
                            operating_points=(("tb-cavern-boxes", 0.9),)),
    ),
    Challenge(
        "ribfrac", "MICCAI 2020 RibFrac", RIBFRAC_INTERFACE,
        demo_size=("--cases", "8", "--shape", "256", "256", "160"), test_size=("--cases", "4"),
        evaluator_description="MICCAI 2020 RibFrac evaluation (FROC detection, classification F1s, Dice/IoU) as "
                              "the official ${RIBFRAC_BRANCH} code scores it",
        evaluator_extras=("ct", "plots"),
        # master: the online evaluation; legacy: the MICCAI 2020 ranking code (official legacy branch)
        editions=(Edition("", {"RIBFRAC_BRANCH": "master"}),
                  Edition("legacy", {"RIBFRAC_BRANCH": "legacy"}, shares_data=True)),
        submissions=(SubmissionFormat("", ("<public_id>.nii.gz", "<any name>.csv"),
                                      "per test case `RibFrac501.nii.gz`, its instance mask (labels 1..n, 0 "
                                      "background, the CT's shape), and exactly one CSV `public_id,label_id,"
                                      "confidence,label_code` with a row per instance and the background row "
                                      "(label_id 0, label_code 0) per case", "froc_average", "macro_f1"),),
        algorithm=Algorithm("medchallenge.algorithms.ribfrac", "MICCAI 2020 RibFrac rib-fracture detection and "
                            "classification: synthetic-data 3-D U-Net (ONNX Runtime), instances and types per CT",
                            generator="ribfrac-ct", test_size=("--cases", "2", "--shape", "112", "104", "40"),
                            operating_points=(("rib-fracture-detections", 0.1),)),
    ),
    Challenge(
        "object-cxr", "object-CXR", OBJECT_CXR_INTERFACE,
        demo_size=("--images", "1000"), test_size=("--images", "200"),
        evaluator_description="object-CXR (MIDL 2020) evaluator: FROC exactly as the official froc.py, and ROC AUC",
        evaluator_extras=("plots", "classification"),
        submissions=(SubmissionFormat("", ("classification.csv", "localization.csv"),
                                      "`classification.csv`: `image_path,prediction` (the probability that the "
                                      "image holds a foreign object), one row per test image; `localization.csv`: "
                                      "`image_path,prediction` with `probability x y` points separated by `;` "
                                      "(pixel coordinates), one row per test image", "auc", "froc"),),
        algorithm=Algorithm("medchallenge.algorithms.object_cxr", "object-CXR foreign objects on chest X-rays: "
                            "synthetic-data heat-map detector (ONNX Runtime), classification.csv + localization.csv",
                            extras=("xray", "onnx", "dicom"), generator="object-cxr-images",
                            demo_size=("--images", "60", "--size", "1024"),
                            test_size=("--images", "6", "--size", "320"),
                            operating_points=(("foreign-object-likelihood", 0.665), ("foreign-objects", 0.665))),
    ),
    Challenge(
        "imageclef-caption", "ImageCLEFmed Caption", CAPTION_INTERFACE,
        demo_size=("--images", "1000"), test_size=("--images", "300"), short_name="caption",
        evaluator_description="ImageCLEFmed Caption ${CAPTION_EDITION}: official concept F1, caption BLEU and "
                              "ROUGE-1",
        evaluator_extras=("caption", "plots", "lemmatize"),
        editions=(Edition("2022", {"CAPTION_EDITION": "2022"}, ("--edition", "2022", "--secondary")),
                  Edition("2021", {"CAPTION_EDITION": "2021"}, ("--edition", "2021"))),
        submissions=(SubmissionFormat("concept-detection", ("concepts.csv",),
                                      "the concept run: `ImageID|CUI;CUI;...` per image (2021: a TAB or `|` "
                                      "after the id)", "concept_f1", "concept_f1_secondary"),
                     SubmissionFormat("caption-prediction", ("captions.csv",),
                                      "the caption run: `ImageID|caption` per image (2021: a TAB or `|` after "
                                      "the id)", "bleu", "rouge1")),
        algorithm=Algorithm("medchallenge.algorithms.imageclef_caption", "ImageCLEFmed Caption 2021/2022: UMLS "
                            "concepts and a retrieved caption per figure, synthetic-data CNN (ONNX Runtime)",
                            extras=("ct", "xray", "onnx"), generator="imageclef-caption-images",
                            test_size=("--images", "8")),
    ),
)}

CONFIGURATIONS: tuple[Configuration, ...] = tuple(c for challenge in CHALLENGES.values()
                                                  for c in challenge.configurations)

# The configurations with data of their own: one demo and one grand-challenge package each.
CONFIGURATIONS_WITH_DATA: tuple[Configuration, ...] = tuple(c for c in CONFIGURATIONS if not c.edition.shares_data)

# Every compose service: the algorithms' (one per configuration with data where the challenge bakes its editions
# into its algorithm images, else one per challenge), then each configuration's evaluator.
SERVICES: tuple[Service, ...] = (
    *(c.algorithm_service for c in CONFIGURATIONS_WITH_DATA
      if c.challenge.algorithm and (c.challenge.algorithm_editions or c == c.challenge.default)),
    *(configuration.service for configuration in CONFIGURATIONS),
)
