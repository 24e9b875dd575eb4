/* The user-space NVMe driver's pure parts: PRP building, the checks every controller reply
 * passes, and status names. No device and no VFIO here, so unit tests run them anywhere. */
#include <errno.h>
#include <stdio.h>

#include "vfio/nvme_pci.h"

int nvme_prp_build(const uint64_t *ent, unsigned n, uint64_t *list, uint64_t list_addr,
		   uint64_t *prp1, uint64_t *prp2)
{
	unsigned i;

	if (!n || n > NVME_PCI_PRP_MAX)
		return -EINVAL;
	for (i = 1; i < n; i++)
		if (ent[i] % NVME_PCI_PAGE)
			return -EINVAL;
	if (ent[0] & 3) /* PRP entries are dword aligned */
		return -EINVAL;
	*prp1 = ent[0];
	*prp2 = 0;
	if (n == 2)
		*prp2 = ent[1];
	else if (n > 2) {
		for (i = 1; i < n; i++)
			list[i - 1] = ent[i];
		*prp2 = list_addr;
	}
	return 0;
}

int nvme_cqe_check(const struct nvme_cqe *e, uint16_t qid, uint32_t depth, void *const *ctx,
		   char *err, unsigned errlen)
{
	if (e->sq_id != qid) {
		snprintf(err, errlen, "completion on queue %u names SQ %u", qid, e->sq_id);
		return -EPROTO;
	}
	if (e->sq_head >= depth) {
		snprintf(err, errlen, "queue %u: completion SQ head %u beyond depth %u", qid,
			 e->sq_head, depth);
		return -EPROTO;
	}
	if (e->cid >= depth || !ctx[e->cid]) {
		snprintf(err, errlen, "queue %u: completion for cid %u, which is not in flight",
			 qid, e->cid);
		return -EPROTO;
	}
	return 0;
}

static const char *nvme_status_name(uint16_t st)
{
	unsigned sct = NVME_STATUS_SCT(st), sc = NVME_STATUS_SC(st);

	if (sct == NVME_SCT_GENERIC) {
		switch (sc) {
		case NVME_SC_SUCCESS:
			return "Success";
		case NVME_SC_INVALID_OPCODE:
			return "Invalid Command Opcode";
		case NVME_SC_INVALID_FIELD:
			return "Invalid Field in Command";
		case NVME_SC_CMDID_CONFLICT:
			return "Command ID Conflict";
		case NVME_SC_DATA_XFER_ERROR:
			return "Data Transfer Error";
		case NVME_SC_INTERNAL:
			return "Internal Error";
		case NVME_SC_ABORT_REQ:
			return "Command Abort Requested";
		case NVME_SC_ABORT_SQ_DELETED:
			return "Aborted: SQ Deletion";
		case NVME_SC_INVALID_NS:
			return "Invalid Namespace";
		case NVME_SC_INVALID_PRP_OFFSET:
			return "PRP Offset Invalid";
		case NVME_SC_NS_WRITE_PROTECTED:
			return "Namespace Write Protected";
		case NVME_SC_LBA_RANGE:
			return "LBA Out of Range";
		case NVME_SC_CAP_EXCEEDED:
			return "Capacity Exceeded";
		case NVME_SC_NS_NOT_READY:
			return "Namespace Not Ready";
		}
	} else if (sct == NVME_SCT_CMD_SPECIFIC) {
		switch (sc) {
		case NVME_SC_CQ_INVALID:
			return "Completion Queue Invalid";
		case NVME_SC_QID_INVALID:
			return "Invalid Queue Identifier";
		case NVME_SC_QUEUE_SIZE:
			return "Invalid Queue Size";
		case NVME_SC_INVALID_VECTOR:
			return "Invalid Interrupt Vector";
		}
	} else if (sct == NVME_SCT_MEDIA) {
		switch (sc) {
		case NVME_SC_WRITE_FAULT:
			return "Write Fault";
		case NVME_SC_READ_ERROR:
			return "Unrecovered Read Error";
		}
	}
	return "Unknown status";
}

void nvme_status_str(uint16_t status, char *buf, unsigned len)
{
	snprintf(buf, len, "%s (SCT 0x%x SC 0x%02x%s)", nvme_status_name(status),
		 NVME_STATUS_SCT(status), NVME_STATUS_SC(status),
		 (status & NVME_STATUS_DNR) ? ", DNR" : "");
}
