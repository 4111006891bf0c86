"""Small files written in each dataset's official layout, for the stager tests (nothing downloaded)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
from PIL import Image

VINDR_CLASSES = ["Aortic enlargement", "Cardiomegaly", "Nodule/Mass", "Pleural effusion"]


def _grey(path: Path, width: int, height: int, seed: int, bits: int = 8) -> None:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    if bits == 16:
        Image.fromarray(rng.integers(0, 4096, (height, width)).astype(np.uint16)).save(path)
    else:
        Image.fromarray(rng.integers(0, 255, (height, width)).astype(np.uint8)).save(path)


def _dicom(path: Path, width: int, height: int, seed: int, monochrome1: bool = False) -> None:
    import pydicom
    from pydicom.dataset import FileDataset, FileMetaDataset
    from pydicom.uid import ExplicitVRLittleEndian, SecondaryCaptureImageStorage, generate_uid

    meta = FileMetaDataset()
    meta.MediaStorageSOPClassUID = SecondaryCaptureImageStorage
    meta.MediaStorageSOPInstanceUID = generate_uid()
    meta.TransferSyntaxUID = ExplicitVRLittleEndian
    ds = FileDataset(str(path), {}, file_meta=meta, preamble=b"\0" * 128)
    ds.SOPClassUID, ds.SOPInstanceUID = meta.MediaStorageSOPClassUID, meta.MediaStorageSOPInstanceUID
    ds.Rows, ds.Columns = height, width
    ds.SamplesPerPixel, ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 1, 16, 12, 11, 0
    ds.PhotometricInterpretation = "MONOCHROME1" if monochrome1 else "MONOCHROME2"
    pixels = np.zeros((height, width), dtype=np.uint16)
    pixels[: height // 2] = 4000  # top half bright in MONOCHROME2
    ds.PixelData = pixels.tobytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    pydicom.dcmwrite(str(path), ds, enforce_file_format=True)


def cell(k: int, width: int, height: int, size: int = 16) -> tuple[int, int, int, int]:
    """A box in the k-th cell of a grid of `size`-pixel cells over the image: each image's own position, so
    that another image's boxes (a replayed answer) do not match it."""
    columns, rows = width // size, height // size
    k %= columns * rows
    x, y = (k % columns) * size, (k // columns) * size
    return x + 2, y + 2, x + size - 2, y + size - 2


def vindr(root: Path, positives: int = 8, negatives: int = 3, kaggle: bool = False, png: bool = False,
          varied: bool = False) -> Path:
    """PhysioNet layout: annotations/annotations_test.csv + test/<id>.dicom (or Kaggle train.csv); `varied`:
    each image's finding at a position of its own."""
    rows = []
    for k in range(positives):
        image_id = f"{k:04x}deadbeef"
        for rad in ("R8", "R9", "R10"):  # three radiologists, slightly different boxes of one finding
            d = {"R8": 0, "R9": 1, "R10": 2}[rad]
            if varied:
                x1, y1, x2, y2 = cell(k, 64, 64)
                rows.append([image_id, rad, VINDR_CLASSES[k % 4], x1, y1, x2 + d, y2])
                continue
            rows.append([image_id, rad, VINDR_CLASSES[k % 4], 10 + d, 12, 40 + d, 44])
        rows.append([image_id, "R8", "Rib fracture", 50, 5, 60, 20])  # a class outside the 14
        if k % 2 and not varied:
            rows.append([image_id, "R9", "Cardiomegaly", 5, 30, 58, 60])
    for k in range(negatives):
        rows.append([f"{k:04x}cafef00d", "R8", "No finding", "", "", "", ""])
    table = root / ("train.csv" if kaggle else "annotations/annotations_test.csv")
    table.parent.mkdir(parents=True, exist_ok=True)
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "rad_id", "class_name", "x_min", "y_min", "x_max", "y_max"])
        writer.writerows(rows)
    for n, image_id in enumerate(sorted({r[0] for r in rows})):
        if png:
            _grey(root / "train_png" / f"{image_id}.png", 64, 64, n)
        else:
            _dicom(root / ("train" if kaggle else "test") / f"{image_id}.dicom", 64, 64, n,
                   monochrome1=image_id == "0000deadbeef")
    return root


def voc(root: Path, count: int = 6, split: int = 4, varied: bool = False) -> Path:
    """BCCD: BCCD/Annotations/*.xml, BCCD/JPEGImages/*.jpg, BCCD/ImageSets/Main/test.txt; `varied`: each
    image's cells at a position of their own."""
    base = root / "BCCD"
    stems = [f"BloodImage_{k:05d}" for k in range(count)]
    for k, stem in enumerate(stems):
        (base / "JPEGImages").mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((48, 64, 3), 150 + k % 100, dtype=np.uint8)).save(base / "JPEGImages" / f"{stem}.jpg")
        boxes = [("RBC", 1, 1, 20, 20), ("WBC", 30, 10, 60, 40), ("Platelets", 5, 30, 9, 34),
                 ("RBC", 50, 40, 70, 52)]  # the last runs past the 64x48 image
        if varied:
            boxes = [(("RBC", "WBC", "Platelets")[k % 3], *cell(k, 64, 48))]
        objects = "".join(
            f"<object><name>{name}</name><bndbox><xmin>{x1}</xmin><ymin>{y1}</ymin><xmax>{x2}</xmax>"
            f"<ymax>{y2}</ymax></bndbox></object>"
            for name, x1, y1, x2, y2 in boxes)
        (base / "Annotations").mkdir(parents=True, exist_ok=True)
        (base / "Annotations" / f"{stem}.xml").write_text(
            f"<annotation><filename>{stem}.jpg</filename><size><width>64</width><height>48</height></size>"
            f"{objects}</annotation>")
    (base / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
    (base / "ImageSets" / "Main" / "test.txt").write_text("\n".join(stems[:split]) + "\n")
    (base / "ImageSets" / "Main" / "train.txt").write_text("\n".join(stems[split:]) + "\n")
    return root


GRAZ_NAMES = ["boneanomaly", "bonelesion", "foreignbody", "fracture", "metal", "periostealreaction",
              "pronatorsign", "softtissue", "text"]


def yolo(root: Path, count: int = 5, varied: bool = False) -> Path:
    """GRAZPEDWRI-DX: images/*.png, yolov5/labels/*.txt, yolov5/meta.yaml with the 9 names; `varied`: a finding
    in every image, each at a position of its own."""
    (root / "folder_structure" / "yolov5" / "labels").mkdir(parents=True, exist_ok=True)
    (root / "folder_structure" / "yolov5" / "meta.yaml").write_text(
        "names:\n" + "".join(f"  - {n}\n" for n in GRAZ_NAMES) + "nc: 9\n")
    for k in range(count):
        stem = f"{1000 + k}_0123456789_01_WRI-L1_M014"
        _grey(root / "images_part1" / f"{stem}.png", 80, 40, k, bits=16 if k == 0 else 8)
        lines = ["3 0.5 0.5 0.25 0.5", "8 0.1 0.1 0.1 0.1"] if k % 2 == 0 else []
        if varied:
            x1, y1, x2, y2 = cell(k, 80, 40, 10)
            lines = [f"{k % 8} {(x1 + x2) / 160} {(y1 + y2) / 80} {(x2 - x1) / 80} {(y2 - y1) / 40}"]
        (root / "folder_structure" / "yolov5" / "labels" / f"{stem}.txt").write_text("\n".join(lines))
    return root


DENTEX_CLASSES = ["Impacted", "Caries", "Periapical Lesion", "Deep Caries"]


def coco(root: Path, count: int = 5, varied: bool = False) -> Path:
    """DENTEX: a hierarchical COCO JSON (categories_1/2/3, category_id_1/2/3) and xrays/*.png; `varied`: one
    finding per image, each at a position of its own."""
    images, annotations = [], []
    for k in range(count):
        name = f"train_{k}.png"
        _grey(root / "xrays" / name, 96, 48, k)
        images.append({"id": k + 1, "file_name": name, "width": 96, "height": 48})
        if varied:
            x1, y1, x2, y2 = cell(k, 96, 48)
            annotations.append({"id": 2 * k + 1, "image_id": k + 1, "category_id_1": 1, "category_id_2": 3,
                                "category_id_3": k % 4, "bbox": [x1, y1, x2 - x1, y2 - y1], "area": 144,
                                "iscrowd": 0})
            continue
        annotations.append({"id": 2 * k + 1, "image_id": k + 1, "category_id_1": 1, "category_id_2": 3,
                            "category_id_3": k % 4, "bbox": [10, 5, 20, 30], "area": 600, "iscrowd": 0})
        annotations.append({"id": 2 * k + 2, "image_id": k + 1, "category_id_1": 2, "category_id_2": 8,
                            "category_id_3": 1, "bbox": [50.5, 10, 8, 8], "area": 64, "iscrowd": 0})
    doc = {"images": images, "annotations": annotations,
           "categories_1": [{"id": q, "name": str(q)} for q in range(1, 5)],
           "categories_2": [{"id": t, "name": str(t)} for t in range(1, 9)],
           "categories_3": [{"id": i, "name": n} for i, n in enumerate(DENTEX_CLASSES)]}
    folder = root / "training_data" / "quadrant-enumeration-disease"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "train_quadrant_enumeration_disease.json").write_text(json.dumps(doc))
    return root
