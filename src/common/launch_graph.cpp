#include "common/launch_graph.hpp"

#include <tuple>

namespace gk::detail {

namespace {

// A graph call's failure as a status, the runtime's last error cleared so that it is reported once (by the status).
Status graph_status(cudaError_t err, const char* op, const char* what) {
  if (err != cudaSuccess) (void)cudaGetLastError();
  return cuda_status(err, op, what);
}

Status issue_in_order(const char* op, const LaunchList& list, cudaStream_t stream) {
  for (int i = 0; i < list.count; ++i) GK_RETURN_IF_ERROR(list.launch[i].issue(op, stream));
  return Status::Ok();
}

}  // namespace

bool LaunchGraphs::NodeKey::operator<(const NodeKey& o) const {
  return std::tie(kernel, grid[0], grid[1], grid[2], threads, smem, cluster_z, programmatic) <
         std::tie(o.kernel, o.grid[0], o.grid[1], o.grid[2], o.threads, o.smem, o.cluster_z, o.programmatic);
}

struct LaunchGraphs::Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphNode_t nodes[LaunchList::kMax] = {};
  ~Graph() {
    if (exec != nullptr) (void)cudaGraphExecDestroy(exec);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
  }
};

Status LaunchGraphs::build(const char* op, const LaunchList& list, std::shared_ptr<Graph>* out) {
  auto g = std::make_shared<Graph>();
  GK_RETURN_IF_ERROR(graph_status(cudaGraphCreate(&g->graph, 0), op, "cudaGraphCreate"));
  for (int i = 0; i < list.count; ++i) {
    const KernelLaunch& l = list.launch[i];
    void* ptrs[KernelLaunch::kMaxArgs];
    const cudaKernelNodeParams p = l.node_params(ptrs);
    GK_RETURN_IF_ERROR(graph_status(cudaGraphAddKernelNode(&g->nodes[i], g->graph, nullptr, 0, &p), op, l.what()));
    if (l.shape().cluster_z) {
      cudaLaunchAttributeValue v{};
      v.clusterDim.x = 1;
      v.clusterDim.y = 1;
      v.clusterDim.z = l.shape().grid.z;
      GK_RETURN_IF_ERROR(graph_status(
          cudaGraphKernelNodeSetAttribute(g->nodes[i], cudaLaunchAttributeClusterDimension, &v), op, l.what()));
    }
    if (i == 0) continue;
    // A programmatic launch may start once every CTA of the kernel before it has let its dependents go (or ended),
    // as programmatic stream serialization does outside a graph.
    cudaGraphEdgeData e{};
    if (l.shape().programmatic) {
      e.from_port = cudaGraphKernelNodePortProgrammatic;
      e.type = cudaGraphDependencyTypeProgrammatic;
    }
    GK_RETURN_IF_ERROR(
        graph_status(cudaGraphAddDependencies(g->graph, &g->nodes[i - 1], &g->nodes[i], &e, 1), op, l.what()));
  }
  GK_RETURN_IF_ERROR(graph_status(cudaGraphInstantiate(&g->exec, g->graph, 0), op, "cudaGraphInstantiate"));
  *out = std::move(g);
  return Status::Ok();
}

Status LaunchGraphs::issue(const char* op, const LaunchList& list, cudaStream_t stream) {
  Key key{};
  for (int i = 0; i < list.count; ++i) {
    const LaunchShape& s = list.launch[i].shape();
    key[i] = NodeKey{list.launch[i].kernel(), {s.grid.x, s.grid.y, s.grid.z}, s.threads, s.smem_bytes, s.cluster_z,
                     i > 0 && s.programmatic};
  }
  std::shared_ptr<Graph>* found = cache_.find(key);
  std::shared_ptr<Graph> g;
  if (found != nullptr) {
    g = *found;
    // Each node takes this call's arguments (the kernel and its shape are the key's).
    for (int i = 0; i < list.count; ++i) {
      void* ptrs[KernelLaunch::kMaxArgs];
      const cudaKernelNodeParams p = list.launch[i].node_params(ptrs);
      GK_RETURN_IF_ERROR(
          graph_status(cudaGraphExecKernelNodeSetParams(g->exec, g->nodes[i], &p), op, list.launch[i].what()));
    }
  } else if (seen_.find(key) == nullptr) {  // the chain's first call: launch by launch
    seen_.insert(key, true);
    return issue_in_order(op, list, stream);
  } else {
    GK_RETURN_IF_ERROR(build(op, list, &g));  // with this call's arguments
    cache_.insert(key, g);
  }
  return graph_status(cudaGraphLaunch(g->exec, stream), op, "cudaGraphLaunch");
}

Status issue_launches(const char* op, const LaunchList& list, LaunchGraphs* graphs, cudaStream_t stream) {
  if (graphs != nullptr && list.count > 1) return graphs->issue(op, list, stream);
  return issue_in_order(op, list, stream);
}

}  // namespace gk::detail
