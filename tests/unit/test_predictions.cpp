// The predict CSV's rows: the class a row predicts and its probabilities, for rows
// that diverged too.
#include "report/predictions.hpp"

#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

using trainhost::device::LossKind;
using trainhost::report::PredictionTable;

TEST_CASE("a prediction's class is torch.argmax's of the logits, for rows with NaN or infinity too", "[predict]") {
    constexpr float nan = std::numeric_limits<float>::quiet_NaN();
    constexpr float inf = std::numeric_limits<float>::infinity();
    PredictionTable table(LossKind::cross_entropy, 3, true);
    const std::vector<std::size_t> indices = {0, 1, 2, 3};
    const std::vector<std::int32_t> labels = {2, 1, 0, 2};
    const std::vector<float> logits = {
        0.0f, 1.0f, 3.0f,  // a plain row: class 2
        1.0f, nan,  0.0f,  // its NaN is the greatest value: class 1
        2.0f, 2.0f, -inf,  // a tie: the first, class 0
        1.0f, -2.0f, inf,  // an infinity: class 2
    };
    table.add(indices, labels, logits);
    const std::string csv = table.csv();
    CHECK(table.rows() == 4);
    CHECK(csv.starts_with("index,label,predicted,p0,p1,p2\n0,2,2,"));
    CHECK(csv.find("\n1,1,1,nan,nan,nan\n") != std::string::npos);
    CHECK(csv.find("\n2,0,0,0.5,0.5,0\n") != std::string::npos);
    CHECK(csv.find("\n3,2,2,nan,nan,nan\n") != std::string::npos);
}
