"""Expert-parallel load balancer: hierarchical greedy placement of MoE expert replicas.

Given how much load each logical expert received in every MoE layer, decide how many physical
replicas each expert gets and which physical slot (and therefore which GPU) hosts each replica.
Physical slots are numbered so that GPU k owns slots [k * R/G, (k + 1) * R/G).
"""

import torch

# EVOLVE-BLOCK-START


def balanced_packing(weight: torch.Tensor, num_packs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Split the items of every row into ``num_packs`` packs of equal cardinality.

    Items are visited heaviest first and each goes to the currently lightest pack that still has
    room (ties: the pack with the lowest index).

    Args:
        weight: [rows, items] weights.
        num_packs: number of packs; must divide the number of items.

    Returns:
        pack: [rows, items] pack index of every item.
        rank: [rows, items] position of every item inside its pack.
    """
    rows, items = weight.shape
    capacity = items // num_packs
    if capacity == 1:
        pack = torch.arange(items, dtype=torch.int64).expand(rows, items).clone()
        return pack, torch.zeros(rows, items, dtype=torch.int64)

    order = torch.sort(weight.float(), dim=-1, descending=True, stable=True).indices.tolist()
    values = weight.tolist()
    pack = [[-1] * items for _ in range(rows)]
    rank = [[-1] * items for _ in range(rows)]
    for r in range(rows):
        load = [0.0] * num_packs
        used = [0] * num_packs
        row_values = values[r]
        row_pack = pack[r]
        row_rank = rank[r]
        for item in order[r]:
            best = -1
            for p in range(num_packs):
                if used[p] < capacity and (best < 0 or load[p] < load[best]):
                    best = p
            row_pack[item] = best
            row_rank[item] = used[best]
            used[best] += 1
            load[best] += row_values[item]
    return torch.tensor(pack, dtype=torch.int64), torch.tensor(rank, dtype=torch.int64)


def replicate_experts(
    weight: torch.Tensor, num_slots: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Give every expert one replica, then hand each spare slot to the expert whose replicas are busiest.

    Args:
        weight: [rows, experts] load per expert.
        num_slots: number of physical slots per row (>= experts).

    Returns:
        slot_expert: [rows, num_slots] expert hosted by every slot.
        slot_rank: [rows, num_slots] replica number of that expert in the slot.
        count: [rows, experts] number of replicas of every expert.
    """
    rows, experts = weight.shape
    row_ids = torch.arange(rows)
    slot_expert = torch.arange(num_slots, dtype=torch.int64).repeat(rows, 1)
    slot_rank = torch.zeros(rows, num_slots, dtype=torch.int64)
    count = torch.ones(rows, experts, dtype=torch.int64)
    for slot in range(experts, num_slots):
        busiest = torch.argmax(weight / count, dim=-1)
        slot_expert[:, slot] = busiest
        slot_rank[:, slot] = count[row_ids, busiest]
        count[row_ids, busiest] += 1
    return slot_expert, slot_rank, count


def invert_permutation(perm: torch.Tensor) -> torch.Tensor:
    """Row-wise inverse of a batch of permutations."""
    # Filled, not empty: an edit that breaks the permutation leaves -1 where memory noise would be.
    inverse = torch.full_like(perm, -1)
    positions = torch.arange(perm.size(-1), dtype=perm.dtype).expand_as(perm)
    inverse.scatter_(-1, perm, positions)
    return inverse


def hierarchical_placement(
    weight: torch.Tensor, num_slots: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Groups -> nodes, then replicas inside each node, then replicas -> GPUs of that node.

    Returns:
        slot_expert: [layers, num_slots] logical expert hosted by every physical slot.
        slot_rank: [layers, num_slots] replica number of that expert in the slot.
        count: [layers, experts] replicas per logical expert.
    """
    layers, experts = weight.shape
    group_size = experts // num_groups
    groups_per_node = num_groups // num_nodes
    experts_per_node = experts // num_nodes
    slots_per_node = num_slots // num_nodes
    gpus_per_node = num_gpus // num_nodes
    slots_per_gpu = num_slots // num_gpus

    # 1) Place whole expert groups on nodes, balancing the summed group load.
    group_load = weight.unflatten(-1, (num_groups, group_size)).sum(-1)
    group_node, group_rank = balanced_packing(group_load, num_nodes)
    # "node-major" order of experts: node 0's experts first, each group contiguous.
    group_start = (group_node * groups_per_node + group_rank) * group_size
    expert_to_nodemajor = (group_start.unsqueeze(-1) + torch.arange(group_size)).flatten(-2)
    nodemajor_to_expert = invert_permutation(expert_to_nodemajor)

    # 2) Inside every node, replicate its experts into that node's slots.
    node_load = weight.gather(-1, nodemajor_to_expert).view(-1, experts_per_node)
    node_slot_expert, node_slot_rank, node_count = replicate_experts(node_load, slots_per_node)

    # 3) Pack each node's replicas onto the node's GPUs by per-replica load.
    replica_load = (node_load / node_count).gather(-1, node_slot_expert)
    gpu, gpu_rank = balanced_packing(replica_load, gpus_per_node)
    slot_to_final = gpu * slots_per_gpu + gpu_rank
    final_to_slot = invert_permutation(slot_to_final)

    # 4) Translate node-local ids back to global logical expert ids.
    final_local = node_slot_expert.gather(-1, final_to_slot)
    node_offset = torch.arange(0, experts, experts_per_node).view(1, -1, 1)
    final_nodemajor = (final_local.view(layers, num_nodes, -1) + node_offset).flatten(-2)
    slot_expert = nodemajor_to_expert.gather(-1, final_nodemajor)
    slot_rank = node_slot_rank.gather(-1, final_to_slot).view(layers, -1)
    count = node_count.view(layers, -1).gather(-1, expert_to_nodemajor)
    return slot_expert, slot_rank, count


def rebalance_experts(
    weight: torch.Tensor, num_replicas: int, num_groups: int, num_nodes: int, num_gpus: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Compute a replica placement for every MoE layer.

    Args:
        weight: [layers, experts] load of every logical expert.
        num_replicas: physical slots per layer (a multiple of num_gpus).
        num_groups: expert groups (experts of a group prefer one node).
        num_nodes: server nodes.
        num_gpus: GPUs (a multiple of num_nodes).

    Returns:
        phy2log: [layers, num_replicas] logical expert of every physical slot.
        log2phy: [layers, experts, max_replicas] physical slots of every expert, padded with -1.
        logcnt: [layers, experts] number of replicas of every expert.
    """
    layers, experts = weight.shape
    weight = weight.float().cpu()
    if num_groups % num_nodes == 0:
        phy2log, rank, logcnt = hierarchical_placement(weight, num_replicas, num_groups, num_nodes, num_gpus)
    else:
        # Groups cannot be spread evenly over nodes: treat the whole cluster as one node.
        phy2log, rank, logcnt = hierarchical_placement(weight, num_replicas, 1, 1, num_gpus)
    max_replicas = num_replicas - experts + 1
    log2phy = torch.full((layers, experts, max_replicas), -1, dtype=torch.int64)
    log2phy.view(layers, -1).scatter_(
        -1,
        phy2log * max_replicas + rank,
        torch.arange(num_replicas, dtype=torch.int64).expand(layers, -1),
    )
    return phy2log, log2phy, logcnt


# EVOLVE-BLOCK-END
