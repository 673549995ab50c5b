// Sync-BN at model level: two "ranks" (threads, each with its own Model and half the batch) whose
// BN layers sum statistics through a shared Reducer give the logits and summed gradients of one
// model on the whole batch, as data-parallel training with --sync-bn must.
#include <catch2/catch.hpp>

#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "grad_check.hpp"
#include "nostrum/model/model.hpp"

using namespace nostrum;

namespace {

// A Reducer over `ranks` threads: each call blocks until every rank contributed, then all get the
// elementwise sum, added in rank order (deterministic).
class ThreadGroupReducer {
 public:
  explicit ThreadGroupReducer(int ranks) : ranks_(ranks), inputs_(ranks) {}

  class Member final : public Reducer {
   public:
    Member(ThreadGroupReducer* group, int rank) : group_(group), rank_(rank) {}
    void sum(double* data, size_t count) override { group_->sum(rank_, data, count); }
    int group_size() const override { return group_->ranks_; }

   private:
    ThreadGroupReducer* group_;
    int rank_;
  };

  void sum(int rank, double* data, size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    inputs_[rank].assign(data, data + count);
    if (++arrived_ == ranks_) {
      result_.assign(count, 0.0);
      for (const auto& in : inputs_)
        for (size_t i = 0; i < count; ++i) result_[i] += in[i];
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return generation_ != generation; });
    }
    std::copy(result_.begin(), result_.end(), data);
    // the result stays valid until every rank copied it: the next round cannot finish before
    // this rank arrives at it
  }

 private:
  int ranks_;
  std::vector<std::vector<double>> inputs_;
  std::vector<double> result_;
  int arrived_ = 0;
  long generation_ = 0;
  std::mutex mutex_;
  std::condition_variable cv_;
};

std::unique_ptr<model::Model> make(int batch) {
  model::ModelConfig c;
  c.name = "resnet8";
  c.num_classes = 10;
  c.in_channels = 1;
  c.width = 8;
  auto m = model::Model::create(c);
  m->build(batch, 12, 12);
  m->init(3);
  return m;
}

double rel(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace

TEST_CASE("sync-BN over two ranks equals one model on the whole batch", "[engine][sync_bn]") {
  const int per_rank = 3, ranks = 2, total = per_rank * ranks, image = 12 * 12;
  auto images = nostrum::testing::random_vector(size_t(total) * image, 9);
  std::vector<int32_t> labels = {0, 3, 5, 7, 9, 1};
  auto whole = make(total);
  const float* whole_out = whole->forward(images.data(), total, true);
  const std::vector<float> whole_logits(whole_out, whole_out + total * 10);
  whole->loss(labels.data(), 0.1f, 1.0f / total);
  whole->backward();

  ThreadGroupReducer group(ranks);
  std::vector<std::unique_ptr<model::Model>> rank_models;
  std::vector<std::unique_ptr<ThreadGroupReducer::Member>> members;
  for (int r = 0; r < ranks; ++r) {
    rank_models.push_back(make(per_rank));
    members.push_back(std::make_unique<ThreadGroupReducer::Member>(&group, r));
    rank_models[r]->set_norm_reducer(members[r].get());
  }
  std::vector<std::vector<float>> logits(ranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto& m = *rank_models[r];
      const float* out = m.forward(images.data() + size_t(r) * per_rank * image, per_rank, true);
      logits[r].assign(out, out + per_rank * 10);
      m.loss(labels.data() + r * per_rank, 0.1f, 1.0f / total);  // 1/(local batch x ranks)
      m.backward();
    });
  for (auto& t : threads) t.join();

  std::vector<float> rank_logits = logits[0];
  rank_logits.insert(rank_logits.end(), logits[1].begin(), logits[1].end());
  CHECK(rel(rank_logits.data(), whole_logits.data(), whole_logits.size()) < 1e-5);
  std::vector<float> summed(rank_models[0]->parameter_count());
  for (size_t i = 0; i < summed.size(); ++i)
    summed[i] = rank_models[0]->gradient_data()[i] + rank_models[1]->gradient_data()[i];
  CHECK(rel(summed.data(), whole->gradient_data(), summed.size()) < 1e-5);
  // running statistics use the global batch too
  const auto& rv0 = rank_models[0]->parameter("layer2.0.bn1.running_var");
  const auto& rv = whole->parameter("layer2.0.bn1.running_var");
  CHECK(rel(rv0.value, rv.value, rv.numel()) < 1e-6);
  // and per-rank statistics (no reducer) would not: the check above can fail
  auto alone = make(per_rank);
  alone->forward(images.data(), per_rank, true);
  alone->loss(labels.data(), 0.1f, 1.0f / total);
  alone->backward();
  CHECK(rel(alone->parameter("layer2.0.bn1.running_var").value, rv.value, rv.numel()) > 1e-4);
}
