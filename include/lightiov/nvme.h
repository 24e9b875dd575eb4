/* NVMe 1.4 as the wire sees it: controller registers, submission/completion entries, admin and
 * I/O opcodes, status codes and the data structures that commands transfer. Sizes are pinned. */
#ifndef LIGHTIOV_NVME_H
#define LIGHTIOV_NVME_H

#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stdint.h>
#endif

/* The layouts are checked at compile time in C (kernel included) and in C++ (CUDA: gpu-fs). */
#define NVME_OFFSETOF(type, member) __builtin_offsetof(type, member)
#ifdef __cplusplus
#define NVME_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
extern "C" {
#else
#define NVME_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

/* ---- Controller registers (BAR0), NVMe 1.4 section 3.1 ---- */

enum nvme_reg {
	NVME_REG_CAP = 0x00,	 /* Controller Capabilities, 64 bit */
	NVME_REG_VS = 0x08,	 /* Version */
	NVME_REG_INTMS = 0x0c,	 /* Interrupt Mask Set */
	NVME_REG_INTMC = 0x10,	 /* Interrupt Mask Clear */
	NVME_REG_CC = 0x14,	 /* Controller Configuration */
	NVME_REG_CSTS = 0x1c,	 /* Controller Status */
	NVME_REG_NSSR = 0x20,	 /* NVM Subsystem Reset */
	NVME_REG_AQA = 0x24,	 /* Admin Queue Attributes */
	NVME_REG_ASQ = 0x28,	 /* Admin SQ Base Address, 64 bit */
	NVME_REG_ACQ = 0x30,	 /* Admin CQ Base Address, 64 bit */
	NVME_REG_CMBLOC = 0x38,	 /* Controller Memory Buffer Location */
	NVME_REG_CMBSZ = 0x3c,	 /* Controller Memory Buffer Size */
	NVME_REG_BPINFO = 0x40,	 /* Boot Partition Information */
	NVME_REG_BPRSEL = 0x44,	 /* Boot Partition Read Select */
	NVME_REG_BPMBL = 0x48,	 /* Boot Partition Memory Buffer Location */
	NVME_REG_CMBMSC = 0x50,	 /* CMB Memory Space Control */
	NVME_REG_CMBSTS = 0x58,	 /* CMB Status */
	NVME_REG_PMRCAP = 0xe00, /* Persistent Memory Region Capabilities */
	NVME_REG_DBS = 0x1000,	 /* first doorbell: SQ0 tail */
};

struct nvme_bar {
	uint64_t cap;
	uint32_t vs;
	uint32_t intms;
	uint32_t intmc;
	uint32_t cc;
	uint32_t rsvd1;
	uint32_t csts;
	uint32_t nssr;
	uint32_t aqa;
	uint64_t asq;
	uint64_t acq;
	uint32_t cmbloc;
	uint32_t cmbsz;
	uint32_t bpinfo;
	uint32_t bprsel;
	uint64_t bpmbl;
	uint64_t cmbmsc;
	uint32_t cmbsts;
	uint8_t rsvd2[0xe00 - 0x5c];
	uint32_t pmrcap;
	uint32_t pmrctl;
	uint32_t pmrsts;
	uint32_t pmrebs;
	uint32_t pmrswtp;
	uint32_t pmrmsc_lo;
	uint32_t pmrmsc_hi;
	uint8_t rsvd3[0x1000 - 0xe1c];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_bar) == 0x1000, "NVMe register block is 4 KiB");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_bar, cc) == NVME_REG_CC, "CC offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_bar, csts) == NVME_REG_CSTS, "CSTS offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_bar, asq) == NVME_REG_ASQ, "ASQ offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_bar, cmbsz) == NVME_REG_CMBSZ, "CMBSZ offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_bar, cmbsts) == NVME_REG_CMBSTS, "CMBSTS offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_bar, pmrcap) == NVME_REG_PMRCAP, "PMRCAP offset");

/* CAP fields */
#define NVME_CAP_MQES(cap)    ((uint32_t)((cap)&0xffff)) /* 0's based */
#define NVME_CAP_CQR	      (1ULL << 16)
#define NVME_CAP_AMS_WRR      (1ULL << 17)
#define NVME_CAP_TO_SHIFT     24 /* 500 ms units */
#define NVME_CAP_DSTRD_SHIFT  32
#define NVME_CAP_DSTRD(cap)   ((unsigned)(((cap) >> 32) & 0xf))
#define NVME_CAP_NSSRS	      (1ULL << 36)
#define NVME_CAP_CSS_NVM      (1ULL << 37)
#define NVME_CAP_BPS	      (1ULL << 45)
#define NVME_CAP_MPSMIN_SHIFT 48
#define NVME_CAP_MPSMAX_SHIFT 52
#define NVME_CAP_PMRS	      (1ULL << 56)
#define NVME_CAP_CMBS	      (1ULL << 57)

#define NVME_VS(maj, min, ter) (((uint32_t)(maj) << 16) | ((uint32_t)(min) << 8) | (ter))
#define NVME_VS_1_4	       NVME_VS(1, 4, 0)

/* CC fields */
#define NVME_CC_EN	   (1u << 0)
#define NVME_CC_CSS(cc)	   (((cc) >> 4) & 0x7)
#define NVME_CC_MPS(cc)	   (((cc) >> 7) & 0xf)
#define NVME_CC_AMS(cc)	   (((cc) >> 11) & 0x7)
#define NVME_CC_SHN(cc)	   (((cc) >> 14) & 0x3)
#define NVME_CC_IOSQES(cc) (((cc) >> 16) & 0xf)
#define NVME_CC_IOCQES(cc) (((cc) >> 20) & 0xf)
#define NVME_CC_SHN_NONE   0
#define NVME_CC_SHN_NORMAL 1
#define NVME_CC_SHN_ABRUPT 2

/* CSTS fields */
#define NVME_CSTS_RDY	      (1u << 0)
#define NVME_CSTS_CFS	      (1u << 1)
#define NVME_CSTS_SHST_SHIFT  2
#define NVME_CSTS_SHST_MASK   (3u << 2)
#define NVME_CSTS_SHST_NORMAL (0u << 2)
#define NVME_CSTS_SHST_OCCUR  (1u << 2)
#define NVME_CSTS_SHST_CMPLT  (2u << 2)
#define NVME_CSTS_NSSRO	      (1u << 4)
#define NVME_CSTS_PP	      (1u << 5)

/* AQA fields (0's based sizes) */
#define NVME_AQA_ASQS(aqa) ((aqa)&0xfff)
#define NVME_AQA_ACQS(aqa) (((aqa) >> 16) & 0xfff)

/* CMBLOC / CMBSZ */
#define NVME_CMBLOC_BIR(v)     ((v)&0x7)
#define NVME_CMBLOC_OFST_SHIFT 12
#define NVME_CMBSZ_SQS	       (1u << 0)
#define NVME_CMBSZ_CQS	       (1u << 1)
#define NVME_CMBSZ_LISTS       (1u << 2)
#define NVME_CMBSZ_RDS	       (1u << 3)
#define NVME_CMBSZ_WDS	       (1u << 4)
#define NVME_CMBSZ_SZU_SHIFT   8 /* 0: 4 KiB, 1: 64 KiB, 2: 1 MiB ... */
#define NVME_CMBSZ_SZ_SHIFT    12
/* CMBMSC / CMBSTS (NVMe 1.4, with CAP.CMBS) */
#define NVME_CMBMSC_CRE	     (1ULL << 0) /* Capabilities Registers Enabled: CMBLOC/CMBSZ */
#define NVME_CMBMSC_CMSE     (1ULL << 1) /* Controller Memory Space Enable */
#define NVME_CMBMSC_CBA_MASK (~0xfffULL) /* Controller Base Address */
#define NVME_CMBSTS_CBAI     (1u << 0)	 /* Controller Base Address Invalid */

/* ---- Queue entries ---- */

/* SGL descriptor (NVMe 1.4 section 4.4): type in bits 7:4 of the last byte, subtype in 3:0. */
struct nvme_sgl_desc {
	uint64_t addr;
	uint32_t len;
	uint8_t rsvd[3];
	uint8_t type;
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_sgl_desc) == 16, "SGL descriptor is 16 bytes");

#define NVME_SGL_TYPE_DATA_BLOCK  0x0
#define NVME_SGL_TYPE(t)	  ((uint8_t)((t) << 4))
#define NVME_PSDT_PRP		  0x0
#define NVME_PSDT_SGL_MPTR_CONTIG 0x1
#define NVME_SQE_FLAGS_PSDT(p)	  ((uint8_t)((p) << 6))

struct nvme_sqe {
	uint8_t opcode;
	uint8_t flags; /* FUSE bits 1:0, PSDT bits 7:6 */
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2;
	uint32_t cdw3;
	uint64_t mptr;
	union { /* data pointer: PSDT 00 the PRP pair, 01 one SGL descriptor */
		struct {
			uint64_t prp1;
			uint64_t prp2;
		};
		struct nvme_sgl_desc sgl;
	};
	uint32_t cdw10;
	uint32_t cdw11;
	uint32_t cdw12;
	uint32_t cdw13;
	uint32_t cdw14;
	uint32_t cdw15;
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_sqe) == 64, "SQ entry is 64 bytes");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_sqe, prp1) == 24, "PRP1 offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_sqe, sgl) == 24, "SGL descriptor offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_sqe, cdw10) == 40, "CDW10 offset");

#define NVME_SQE_FUSE(flags) ((flags)&0x3)
#define NVME_SQE_PSDT(flags) (((flags) >> 6) & 0x3)

struct nvme_cqe {
	uint32_t dw0; /* command specific */
	uint32_t dw1;
	uint16_t sq_head;
	uint16_t sq_id;
	uint16_t cid;
	uint16_t status; /* bit 0: phase tag; 15:1 status field */
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_cqe) == 16, "CQ entry is 16 bytes");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_cqe, status) == 14, "CQE status offset");

#define NVME_SQES_LOG2 6
#define NVME_CQES_LOG2 4

/* ---- Status field (without the phase bit): SCT in bits 10:8, SC in 7:0, DNR bit 14 ---- */
#define NVME_SCT_GENERIC      0x0
#define NVME_SCT_CMD_SPECIFIC 0x1
#define NVME_SCT_MEDIA	      0x2
#define NVME_STATUS(sct, sc)  ((uint16_t)(((sct) << 8) | (sc)))
#define NVME_STATUS_DNR	      0x4000
#define NVME_STATUS_MORE      0x2000
#define NVME_STATUS_SCT(s)    (((s) >> 8) & 0x7)
#define NVME_STATUS_SC(s)     ((s)&0xff)

enum nvme_status {
	NVME_SC_SUCCESS = 0x00,
	NVME_SC_INVALID_OPCODE = 0x01,
	NVME_SC_INVALID_FIELD = 0x02,
	NVME_SC_CMDID_CONFLICT = 0x03,
	NVME_SC_DATA_XFER_ERROR = 0x04,
	NVME_SC_POWER_LOSS = 0x05,
	NVME_SC_INTERNAL = 0x06,
	NVME_SC_ABORT_REQ = 0x07,
	NVME_SC_ABORT_SQ_DELETED = 0x08,
	NVME_SC_FUSED_FAIL = 0x09,
	NVME_SC_FUSED_MISSING = 0x0a,
	NVME_SC_INVALID_NS = 0x0b,
	NVME_SC_CMD_SEQ_ERROR = 0x0c,
	NVME_SC_SGL_INVALID_LAST = 0x0d,
	NVME_SC_INVALID_PRP_OFFSET = 0x13,
	NVME_SC_NS_WRITE_PROTECTED = 0x20,
	NVME_SC_LBA_RANGE = 0x80,
	NVME_SC_CAP_EXCEEDED = 0x81,
	NVME_SC_NS_NOT_READY = 0x82,
	/* command specific (SCT 1) */
	NVME_SC_CQ_INVALID = 0x00,
	NVME_SC_QID_INVALID = 0x01,
	NVME_SC_QUEUE_SIZE = 0x02,
	NVME_SC_ABORT_LIMIT = 0x03,
	NVME_SC_ASYNC_LIMIT = 0x05,
	NVME_SC_FIRMWARE_SLOT = 0x06,
	NVME_SC_INVALID_VECTOR = 0x08,
	NVME_SC_INVALID_LOG_PAGE = 0x09,
	NVME_SC_INVALID_FORMAT = 0x0a,
	NVME_SC_INVALID_QUEUE_DELETION = 0x0c,
	NVME_SC_FEATURE_NOT_SAVEABLE = 0x0d,
	NVME_SC_FEATURE_NOT_CHANGEABLE = 0x0e,
	NVME_SC_ATTEMPTED_WRITE_RO = 0x82, /* SCT 1, NVM command set */
	/* media (SCT 2) */
	NVME_SC_WRITE_FAULT = 0x80,
	NVME_SC_READ_ERROR = 0x81,
};

/* ---- Opcodes ---- */
enum nvme_admin_opcode {
	NVME_ADMIN_DELETE_SQ = 0x00,
	NVME_ADMIN_CREATE_SQ = 0x01,
	NVME_ADMIN_GET_LOG_PAGE = 0x02,
	NVME_ADMIN_DELETE_CQ = 0x04,
	NVME_ADMIN_CREATE_CQ = 0x05,
	NVME_ADMIN_IDENTIFY = 0x06,
	NVME_ADMIN_ABORT = 0x08,
	NVME_ADMIN_SET_FEATURES = 0x09,
	NVME_ADMIN_GET_FEATURES = 0x0a,
	NVME_ADMIN_ASYNC_EVENT = 0x0c,
	NVME_ADMIN_NS_MGMT = 0x0d,
	NVME_ADMIN_FW_COMMIT = 0x10,
	NVME_ADMIN_FW_DOWNLOAD = 0x11,
	NVME_ADMIN_KEEP_ALIVE = 0x18,
	NVME_ADMIN_DBBUF = 0x7c,
	NVME_ADMIN_FORMAT_NVM = 0x80,
};

enum nvme_io_opcode {
	NVME_CMD_FLUSH = 0x00,
	NVME_CMD_WRITE = 0x01,
	NVME_CMD_READ = 0x02,
	NVME_CMD_WRITE_UNCOR = 0x04,
	NVME_CMD_COMPARE = 0x05,
	NVME_CMD_WRITE_ZEROES = 0x08,
	NVME_CMD_DSM = 0x09,
};

/* Identify CNS values */
enum nvme_id_cns {
	NVME_ID_CNS_NS = 0x00,
	NVME_ID_CNS_CTRL = 0x01,
	NVME_ID_CNS_NS_ACTIVE_LIST = 0x02,
	NVME_ID_CNS_NS_DESC_LIST = 0x03,
};

/* Feature identifiers */
enum nvme_feat {
	NVME_FEAT_ARBITRATION = 0x01,
	NVME_FEAT_POWER_MGMT = 0x02,
	NVME_FEAT_LBA_RANGE = 0x03,
	NVME_FEAT_TEMP_THRESH = 0x04,
	NVME_FEAT_ERR_RECOVERY = 0x05,
	NVME_FEAT_VOLATILE_WC = 0x06,
	NVME_FEAT_NUM_QUEUES = 0x07,
	NVME_FEAT_IRQ_COALESCE = 0x08,
	NVME_FEAT_IRQ_CONFIG = 0x09,
	NVME_FEAT_WRITE_ATOMIC = 0x0a,
	NVME_FEAT_ASYNC_EVENT = 0x0b,
	NVME_FEAT_AUTO_PST = 0x0c,
	NVME_FEAT_HOST_MEM_BUF = 0x0d,
	NVME_FEAT_TIMESTAMP = 0x0e,
	NVME_FEAT_KATO = 0x0f,
};
#define NVME_FEAT_SEL(cdw10) (((cdw10) >> 8) & 0x7)
#define NVME_FEAT_IVC_CD     (1u << 16) /* Interrupt Vector Configuration: coalescing disable */
#define NVME_FEAT_SAVE	     (1u << 31)

/* Log pages */
enum nvme_log {
	NVME_LOG_ERROR = 0x01,
	NVME_LOG_SMART = 0x02,
	NVME_LOG_FW_SLOT = 0x03,
};

/* Asynchronous event: completion dw0 = type | info << 8 | log page << 16 */
enum nvme_aer_type {
	NVME_AER_TYPE_ERROR = 0x0,
	NVME_AER_TYPE_SMART = 0x1,
	NVME_AER_TYPE_NOTICE = 0x2,
	NVME_AER_TYPE_IO_CMD = 0x6,
	NVME_AER_TYPE_VENDOR = 0x7,
};
enum nvme_aer_info_error {
	NVME_AER_ERR_INVALID_DB_REG = 0x00,
	NVME_AER_ERR_INVALID_DB_VALUE = 0x01,
	NVME_AER_ERR_DIAG_FAILURE = 0x02,
	NVME_AER_ERR_PERSISTENT_INTERNAL = 0x03,
	NVME_AER_ERR_TRANSIENT_INTERNAL = 0x04,
};

/* ---- Data structures ---- */

struct nvme_psd {
	uint16_t max_power;
	uint8_t rsvd2;
	uint8_t flags;
	uint32_t entry_lat;
	uint32_t exit_lat;
	uint8_t read_tput;
	uint8_t read_lat;
	uint8_t write_tput;
	uint8_t write_lat;
	uint16_t idle_power;
	uint8_t idle_scale;
	uint8_t rsvd19;
	uint16_t active_power;
	uint8_t active_work_scale;
	uint8_t rsvd23[9];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_psd) == 32, "power state descriptor is 32 bytes");

struct nvme_id_ctrl {
	uint16_t vid;
	uint16_t ssvid;
	char sn[20];
	char mn[40];
	char fr[8];
	uint8_t rab;
	uint8_t ieee[3];
	uint8_t cmic;
	uint8_t mdts;
	uint16_t cntlid;
	uint32_t ver;
	uint32_t rtd3r;
	uint32_t rtd3e;
	uint32_t oaes;
	uint32_t ctratt;
	uint16_t rrls;
	uint8_t rsvd102[9];
	uint8_t cntrltype;
	uint8_t fguid[16];
	uint16_t crdt1;
	uint16_t crdt2;
	uint16_t crdt3;
	uint8_t rsvd134[122];
	uint16_t oacs;
	uint8_t acl;
	uint8_t aerl;
	uint8_t frmw;
	uint8_t lpa;
	uint8_t elpe;
	uint8_t npss;
	uint8_t avscc;
	uint8_t apsta;
	uint16_t wctemp;
	uint16_t cctemp;
	uint16_t mtfa;
	uint32_t hmpre;
	uint32_t hmmin;
	uint8_t tnvmcap[16];
	uint8_t unvmcap[16];
	uint32_t rpmbs;
	uint16_t edstt;
	uint8_t dsto;
	uint8_t fwug;
	uint16_t kas;
	uint16_t hctma;
	uint16_t mntmt;
	uint16_t mxtmt;
	uint32_t sanicap;
	uint32_t hmminds;
	uint16_t hmmaxd;
	uint16_t nsetidmax;
	uint16_t endgidmax;
	uint8_t anatt;
	uint8_t anacap;
	uint32_t anagrpmax;
	uint32_t nanagrpid;
	uint32_t pels;
	uint8_t rsvd356[156];
	uint8_t sqes;
	uint8_t cqes;
	uint16_t maxcmd;
	uint32_t nn;
	uint16_t oncs;
	uint16_t fuses;
	uint8_t fna;
	uint8_t vwc;
	uint16_t awun;
	uint16_t awupf;
	uint8_t nvscc;
	uint8_t nwpc;
	uint16_t acwu;
	uint8_t rsvd534[2];
	uint32_t sgls;
	uint32_t mnan;
	uint8_t rsvd544[224];
	char subnqn[256];
	uint8_t rsvd1024[768];
	uint32_t ioccsz;
	uint32_t iorcsz;
	uint16_t icdoff;
	uint8_t ctrattr;
	uint8_t msdbd;
	uint8_t rsvd1804[244];
	struct nvme_psd psd[32];
	uint8_t vs[1024];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_id_ctrl) == 4096, "Identify Controller is 4 KiB");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_id_ctrl, oacs) == 256, "OACS offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_id_ctrl, sqes) == 512, "SQES offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_id_ctrl, subnqn) == 768, "SUBNQN offset");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_id_ctrl, psd) == 2048, "PSD offset");

/* OACS / ONCS / LPA bits used here */
#define NVME_CTRL_OACS_DBBUF	    (1u << 8)
#define NVME_CTRL_ONCS_DSM	    (1u << 2)
#define NVME_CTRL_ONCS_WRITE_ZEROES (1u << 3)
#define NVME_CTRL_ONCS_FEAT_SAVE    (1u << 4)
#define NVME_CTRL_VWC_PRESENT	    (1u << 0)
#define NVME_CTRL_LPA_EXT_DATA	    (1u << 2)
#define NVME_CTRL_OAES_NS_ATTR	    (1u << 8)

struct nvme_lbaf {
	uint16_t ms;
	uint8_t ds; /* log2 of the LBA data size */
	uint8_t rp;
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_lbaf) == 4, "LBA format is 4 bytes");

struct nvme_id_ns {
	uint64_t nsze;
	uint64_t ncap;
	uint64_t nuse;
	uint8_t nsfeat;
	uint8_t nlbaf;
	uint8_t flbas;
	uint8_t mc;
	uint8_t dpc;
	uint8_t dps;
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint8_t dlfeat;
	uint16_t nawun;
	uint16_t nawupf;
	uint16_t nacwu;
	uint16_t nabsn;
	uint16_t nabo;
	uint16_t nabspf;
	uint16_t noiob;
	uint8_t nvmcap[16];
	uint16_t npwg;
	uint16_t npwa;
	uint16_t npdg;
	uint16_t npda;
	uint16_t nows;
	uint8_t rsvd74[18];
	uint32_t anagrpid;
	uint8_t rsvd96[3];
	uint8_t nsattr;
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nguid[16];
	uint8_t eui64[8];
	struct nvme_lbaf lbaf[16];
	uint8_t rsvd192[192];
	uint8_t vs[3712];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_id_ns) == 4096, "Identify Namespace is 4 KiB");
NVME_STATIC_ASSERT(NVME_OFFSETOF(struct nvme_id_ns, lbaf) == 128, "LBAF offset");

/* Namespace Identification Descriptor header (CNS 3); NIDL bytes of NID follow */
struct nvme_ns_id_desc {
	uint8_t nidt;
	uint8_t nidl;
	uint16_t rsvd;
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_ns_id_desc) == 4, "NS id descriptor header is 4 bytes");
#define NVME_NIDT_EUI64 1
#define NVME_NIDT_NGUID 2
#define NVME_NIDT_UUID	3

struct nvme_error_log {
	uint64_t error_count;
	uint16_t sqid;
	uint16_t cmdid;
	uint16_t status_field;
	uint16_t param_error_location;
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs;
	uint8_t trtype;
	uint8_t rsvd30[2];
	uint64_t cs;
	uint16_t trtype_spec_info;
	uint8_t rsvd42[22];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_error_log) == 64, "error log entry is 64 bytes");

struct nvme_smart_log {
	uint8_t critical_warning;
	uint16_t temperature; /* Kelvin */
	uint8_t avail_spare;
	uint8_t spare_thresh;
	uint8_t percent_used;
	uint8_t endu_grp_crit_warn_sumry;
	uint8_t rsvd7[25];
	uint64_t data_units_read[2]; /* 1000 units of 512 bytes */
	uint64_t data_units_written[2];
	uint64_t host_reads[2];
	uint64_t host_writes[2];
	uint64_t ctrl_busy_time[2];
	uint64_t power_cycles[2];
	uint64_t power_on_hours[2];
	uint64_t unsafe_shutdowns[2];
	uint64_t media_errors[2];
	uint64_t num_err_log_entries[2];
	uint32_t warning_temp_time;
	uint32_t critical_comp_time;
	uint16_t temp_sensor[8];
	uint32_t thm_temp1_trans_count;
	uint32_t thm_temp2_trans_count;
	uint32_t thm_temp1_total_time;
	uint32_t thm_temp2_total_time;
	uint8_t rsvd232[280];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_smart_log) == 512, "SMART log is 512 bytes");
#define NVME_SMART_CRIT_READONLY (1u << 3)

struct nvme_fw_slot_log {
	uint8_t afi;
	uint8_t rsvd1[7];
	char frs[7][8];
	uint8_t rsvd64[448];
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_fw_slot_log) == 512, "firmware slot log is 512 bytes");

/* Dataset Management range */
struct nvme_dsm_range {
	uint32_t cattr;
	uint32_t nlb;
	uint64_t slba;
} __attribute__((packed));
NVME_STATIC_ASSERT(sizeof(struct nvme_dsm_range) == 16, "DSM range is 16 bytes");
#define NVME_DSM_AD (1u << 2)

/* Write Zeroes cdw12 */
#define NVME_RW_FUA  (1u << 30)
#define NVME_WZ_DEAC (1u << 25)

#ifdef __cplusplus
}
#endif

#endif
