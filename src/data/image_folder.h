// images:DIR, a folder laid out as torchvision's ImageFolder reads it: one
// sub-folder per class (classes sorted by name, indexed from 0), each
// holding JPEG and PNG files at any depth, listed in ImageFolder's order
// (directories sorted by path, files by name), so sample i is
// ImageFolder's sample i. Other files are skipped, as ImageFolder skips
// them; a .bmp, .ppm, .pgm, .tif(f) or .webp file, which ImageFolder would
// read, is refused by name rather than silently renumbering the samples.
//
// Fields: "x", float32[3, SIZE, SIZE] (image_transform.h), "y", int64 (the
// class). A training read (ReadContext::train) takes RandomResizedCrop and a
// flip drawn from sample_random(ctx, i); an evaluation read, Resize and
// CenterCrop. Split: Test is every tenth file (i % 10 == 9, so each class
// keeps about a tenth), Train the others, All every file.
#pragma once
#include <memory>
#include <string>

#include "trainstep/dataset.h"

namespace ts {

// spec: "images:DIR:SIZE[:OPTION=VALUE]...", options mean=R,G,B std=R,G,B
// resize=N scale=LO,HI ratio=LO,HI flip=P. Throws ts::Error for a bad
// spec, a missing or empty folder, or an unsupported image file.
std::unique_ptr<Dataset> open_image_folder(const std::string& spec, Split split);

}  // namespace ts
