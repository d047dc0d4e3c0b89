"""Small valid inputs of every ingest format, the seeds the parser fuzz tests mutate
(``tests/test_fuzz_parsers.py``). Each is written by hand in the shape of formats.md and the
real samples of ../shared/reference, a few lines long so that 10,000 mutants a format stay
cheap, and touches the parser's main paths (every layout, rank tags, zones, archives...).

A ``Seed`` names the format, the file that is mutated (its path sets the host or job a format
reads from paths) and fixed companion files (a Gavel trace's throughputs JSON)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

RM = "org.apache.hadoop.yarn.server.resourcemanager"
APP = "application_1637633166384_0001"
ATT = "appattempt_1637633166384_0001_000001"
CONT = "container_1637633166384_0001_01_00000"
T0 = 1507014480  # 2017-10-03 07:08:00 UTC


@dataclass(frozen=True)
class Seed:
    """One fuzz target: ``path`` (relative) holding ``data`` is mutated; ``companions`` are
    written as they are. ``lines``: the format reads one row per non-blank line after
    ``header`` lines, so rows + rejects must account for every such line."""

    format: str
    path: str
    data: bytes
    companions: dict[str, bytes] = field(default_factory=dict)
    lines: bool = False
    header: int = 0


def _lines(*rows: str) -> bytes:
    return ("\n".join(rows) + "\n").encode()


MACHINE_LIST = _lines(
    "machineId, number of GPUs, single GPU mem", "m1,8, 24GB", "m2,2, 12GB", "m3,8, 24GB"
)

JOB_LOG = (
    "["
    + ",\n".join(
        json.dumps(j)
        for j in [
            {
                "status": "Pass",
                "vc": "vc1",
                "jobid": "application_1_1",
                "submitted_time": "2017-10-01 10:00:00",
                "user": "u1",
                "attempts": [
                    {
                        "start_time": "2017-10-01 10:01:00",
                        "end_time": "2017-10-01 10:30:00",
                        "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}],
                    }
                ],
            },
            {
                "status": "Failed",
                "vc": "vc2",
                "jobid": "application_1_2",
                "submitted_time": "2017-11-05 01:30:00",
                "user": "u2",
                "attempts": [
                    {
                        "start_time": "2017-11-05 01:40:00",
                        "end_time": "2017-11-05 01:10:00",
                        "detail": [{"ip": "m1", "gpus": ["gpu2"]}, {"ip": "m2", "gpus": ["gpu0"]}],
                    },
                    {"start_time": "2017-11-05 02:00:00", "end_time": "None", "detail": []},
                ],
            },
            {
                "status": "Running",
                "vc": "vc1",
                "jobid": "application_1_3",
                "submitted_time": "2017-10-02 09:00:00",
                "user": "u1",
                "attempts": [],
            },
        ]
    )
    + "]\n"
).encode()

GPU_UTIL = _lines(
    "time,machineId,gpu0_util,gpu1_util,gpu2_util,gpu3_util,gpu4_util,gpu5_util,gpu6_util,"
    "gpu7_util",
    "2017-10-03 00:08:00 PDT,m1,10,20,30,40,50,60,70,80,",
    "2017-10-03 00:09:00 PDT,m1,NA,NA,NA,NA,NA,NA,NA,NA,",
    "2017-11-05 01:30:00 PST,m2,1.5,0,,,,,,,",
    "2017-10-03 00:10:00,m1,11,21,31,41,51,61,71,81,",
)
CPU_UTIL = _lines(
    "time,machine_id,cpu_util",
    "2017-10-03 00:08:00 PDT,m1,12.5",
    "2017-10-03 00:09:00 PDT,m1,NA",
    "2017-11-05 01:30:00 PST,m2,99",
    "2017-10-03 00:10:00,m3,0",
)
MEM_UTIL = _lines(
    "time,machine_id,mem_total,mem_free",
    "2017-10-03 00:08:00 PDT,m1,264498140,200000000",
    "2017-10-03 00:09:00 PDT,m1,0,0",
    "2017-11-05 01:30:00 PST,m2,NA,NA",
    "2017-10-03 00:10:00,m3,132249070,1000",
)
POLLUX = _lines(
    "timestamp,duration,num_gpus,gpu_time,cluster",
    "2017-10-03 00:08:00,3600,8,28800,vc1",
    "2017-10-03 00:09:30.5,60,1,60,vc2",
    "2017-11-05 01:30:00,125.25,0,0,vc1",
    "2017-10-04 12:00:00,86400,64,5529600,vc3",
)
RFOLD = _lines(
    "#job id,arrival time (sec),topology,shape,size,duration (sec)",
    "1,0,torus,1x1,1,3600",
    "2,12.5,torus,2x2,4,60",
    "3,86400,torus,1x8,8,7200.5",
)
GAVEL_TRACE = _lines(
    "ResNet-18 (batch size 16)\tpython3 main.py\t--num_steps\t1\t1000\t0\t1",
    "A3C\tpython3 main.py --env PongDeterministic-v4\t--max_steps\t0\t8857\t12.5\t2",
    "LM (batch size 10)\tpython main.py\t/data\t--steps\t1\t400\t4\t1\t-1.000000\t3600",
    "A3C\tpython3 main.py\t--max_steps\t0\t100\t1\t2\t-1\t60",
)
GAVEL_THROUGHPUTS = json.dumps(
    {
        "v100": {
            "('ResNet-18 (batch size 16)', 1)": {"null": 12.5, "('A3C', 1)": [6.0, 3.0]},
            "('A3C', 1)": {"null": 11.0},
            "('A3C', 2)": {"null": 20.0},
            "('LM (batch size 10)', 4)": {"null": 2.0},
        },
        "k80": {"('A3C', 1)": {"null": 3.0}},
    },
    indent=1,
).encode()


def _rm(ms: int, logger: str, msg: str) -> str:
    return f"2021-11-23 10:06:{50 + ms // 1000:02d},{ms % 1000:03d} INFO {RM}.{logger}: {msg}"


_CAP = "<memory:2048, vCores:1, yarn.io/gpu: 2>"
YARN = _lines(
    "STARTUP_MSG: Starting ResourceManager",
    _rm(0, "rmapp.RMAppImpl", f"{APP} State change from NEW to NEW_SAVING on event = START"),
    _rm(10, "rmapp.RMAppImpl", f"{APP} State change from NEW_SAVING to SUBMITTED"),
    _rm(
        20,
        "RMAuditLogger",
        f"USER=alice\tIP=10.0.0.1\tOPERATION=Submit Application Request\tTARGET=ClientRMService"
        f"\tRESULT=SUCCESS\tAPPID={APP}\tQUEUENAME=vc1",
    ),
    _rm(
        30,
        "scheduler.capacity.CapacityScheduler",
        f"Accepted application {APP} from user: alice, in queue: vc1",
    ),
    _rm(40, "rmapp.RMAppImpl", f"{APP} State change from SUBMITTED to ACCEPTED"),
    _rm(50, "rmapp.attempt.RMAppAttemptImpl", f"{ATT} State change from NEW to SUBMITTED"),
    _rm(60, "rmapp.attempt.RMAppAttemptImpl", f"{ATT} State change from SUBMITTED to SCHEDULED"),
    _rm(
        1000,
        "scheduler.SchedulerNode",
        f"Assigned container {CONT}1 of capacity {_CAP} on host m1:45454, which has 1 "
        f"containers, {_CAP} used and <memory:6144, vCores:7, yarn.io/gpu: 6> available after "
        "allocation",
    ),
    _rm(
        1010, "rmcontainer.RMContainerImpl", f"{CONT}1 Container Transitioned from NEW to ALLOCATED"
    ),
    _rm(
        1020,
        "rmapp.attempt.RMAppAttemptImpl",
        f"Storing attempt: AppId: {APP} AttemptId: {ATT} MasterContainer: Container: "
        f"[ContainerId: {CONT}1, AllocationRequestId: 0, Version: 0, NodeId: m1:45454, "
        f"NodeHttpAddress: m1:8042, Resource: {_CAP}, Priority: 0, Token: Token {{ }}, ]",
    ),
    _rm(
        1030,
        "rmapp.attempt.RMAppAttemptImpl",
        f"{ATT} State change from SCHEDULED to ALLOCATED_SAVING",
    ),
    "\tat org.apache.hadoop.ipc.Server$Handler.run(Server.java:1)",
    _rm(
        2000,
        "rmapp.attempt.RMAppAttemptImpl",
        f"Application Attempt {ATT} is done. finalState=FINISHED",
    ),
    _rm(
        2010,
        "rmapp.RMAppImpl",
        f"{APP} State change from RUNNING to FINISHED on event = ATTEMPT_FINISHED",
    ),
    _rm(
        2020,
        "RMAppManager$ApplicationSummary",
        f"appId={APP},name=train\\,net,user=alice,queue=vc1,state=FINISHED,trackingUrl=http://rm/,"
        "appMasterHost=m1,submitTime=1637690810000,startTime=1637690811000,"
        "finishTime=1637690812000,finalStatus=SUCCEEDED",
    ),
    '252826:e,06/21/2017 16:10:13,yarn resourcemanager,DefaultTag,Pid="5156" Tid="39272" '
    'TS="0x01D2EAA8DD060D14" String1="17/06/21 16:10:13 INFO rmapp.RMAppImpl: '
    'application_1498060000000_0002 State change from NEW to NEW_SAVING"',
)
HADOOP_AM = _lines(
    "2015-10-18 18:01:47,978 INFO [main] org.apache.hadoop.mapreduce.v2.app.MRAppMaster: "
    "Created MRAppMaster for application appattempt_1445144423722_0020_000001",
    "2015-10-18 18:01:48,963 INFO [main] org.apache.hadoop.mapreduce.v2.app.MRAppMaster: "
    "Executing with tokens:",
    "2015-10-18 18:01:49,228 INFO [main] org.apache.hadoop.conf.Configuration: job.xml",
)


def _metric(name: str, val: str, tn: int, type_: str = "float") -> str:
    return (
        f'<METRIC NAME="{name}" VAL="{val}" TYPE="{type_}" UNITS="%" TN="{tn}" TMAX="60" '
        'DMAX="0" SLOPE="both" SOURCE="gmond">\n<EXTRA_DATA>\n'
        '<EXTRA_ELEMENT NAME="GROUP" VAL="gpu"/>\n</EXTRA_DATA>\n</METRIC>'
    )


GMOND = _lines(
    "Trying 10.0.0.1...",
    '<?xml version="1.0" encoding="ISO-8859-1" standalone="yes"?>',
    '<GANGLIA_XML VERSION="3.7.2" SOURCE="gmetad">',
    f'<GRID NAME="philly" AUTHORITY="http://gm/" LOCALTIME="{T0 + 53}">',
    f'<CLUSTER NAME="gpu" LOCALTIME="{T0 + 50}" OWNER="msr" LATLONG="" URL="">',
    f'<HOST NAME="m47" IP="10.0.0.47" REPORTED="{T0 + 45}" TN="5" TMAX="20" DMAX="0">',
    _metric("gpu0_util", "80", 10, "uint32"),
    _metric("gpu0_mem_util", "50", 10, "uint32"),
    _metric("cpu_idle", "70.0", 20),
    _metric("mem_total", "1000", 500),
    _metric("mem_free", "400", 10),
    _metric("os_name", "Linux", 600, "string"),
    "</HOST>",
    f'<HOST NAME="m48" IP="10.0.0.48" REPORTED="{T0 + 50}" TN="0" TMAX="20" DMAX="0">',
    _metric("cpu_user", "5", 5),
    "</HOST>",
    "</CLUSTER>",
    '<METRICS NAME="load_one" SUM="1" NUM="2"/>',
    "</GRID>",
    "</GANGLIA_XML>",
)
XPORT_XML = _lines(
    '<?xml version="1.0" encoding="ISO-8859-1"?>',
    "<xport>",
    "  <meta>",
    f"    <start>{T0}</start>",
    "    <step>15</step>",
    f"    <end>{T0 + 45}</end>",
    "    <rows>3</rows>",
    "    <columns>2</columns>",
    "    <legend>",
    "      <entry>gpu0_util</entry>",
    "      <entry>cpu_idle</entry>",
    "    </legend>",
    "  </meta>",
    "  <data>",
    f"    <row><t>{T0 + 15}</t><v>1.0000000000e+01</v><v>NaN</v></row>",
    f"    <row><t>{T0 + 30}</t><v>2.0000000000e+01</v><v>7.0e+01</v></row>",
    f"    <row><t>{T0 + 45}</t><v>3.0000000000e+01</v><v>7.5e+01</v></row>",
    "  </data>",
    "</xport>",
)
XPORT_JSON = _lines(
    '{ "about": "RRDtool graph JSON output",',
    '  "meta": {',
    f'    "start": {T0},',
    '    "step": 60,',
    f'    "end": {T0 + 180},',
    '    "legend": [ "gpu0_util", "mem_free" ]',
    "     },",
    '  "data": [',
    "    [ null, null ],",
    "    [ 1.5e+01, 3.6845819e+05 ],",
    "    [ 0.0000000e+00, 3.6293297e+05 ]",
    "  ]",
    "}",
)
RRD_DUMP = _lines(
    '<?xml version="1.0" encoding="utf-8"?>',
    '<!DOCTYPE rrd SYSTEM "https://oss.oetiker.ch/rrdtool/rrdtool.dtd">',
    "<!-- Round Robin Database Dump -->",
    "<rrd>",
    "\t<version>0003</version>",
    "\t<step>60</step> <!-- Seconds -->",
    f"\t<lastupdate>{T0 + 130}</lastupdate>",
    "\t<ds><name> sum </name><type> GAUGE </type></ds>",
    "\t<rra>",
    "\t\t<cf>AVERAGE</cf>",
    "\t\t<pdp_per_row>1</pdp_per_row> <!-- 60 seconds -->",
    "\t\t<database>",
    f"\t\t\t<!-- {T0} --> <row><v>1.0000000000e+01</v></row>",
    f"\t\t\t<!-- {T0 + 60} --> <row><v>NaN</v></row>",
    f"\t\t\t<!-- {T0 + 120} --> <row><v>3.0000000000e+01</v></row>",
    "\t\t</database>",
    "\t</rra>",
    "\t<rra>",
    "\t\t<cf>AVERAGE</cf>",
    "\t\t<pdp_per_row>5</pdp_per_row>",
    "\t\t<database>",
    f"\t\t\t<!-- {T0 - 300} --> <row><v>5.0000000000e+00</v></row>",
    "\t\t</database>",
    "\t</rra>",
    "\t<rra><cf>MAX</cf><pdp_per_row>1</pdp_per_row><database><row><v>9</v></row></database></rra>",
    "</rrd>",
)
GANGLIA_CSV = _lines(
    "Timestamp,gpu0_util,gpu1_util",
    "2017-10-03T00:08:15-07:00,10,NaN",
    "2017-10-03T00:08:30-07:00,20,5",
    "1507014540,30,",
    "2017-10-03 00:09:15,40,6",
)
GANGLIA_JSON = json.dumps(
    [
        {
            "ds_name": "a0",
            "cluster_name": "gpu",
            "graph_type": "stack",
            "host_name": "m47",
            "metric_name": "gpu0_util",
            "datapoints": [[10, T0 + 15], [20.5, T0 + 30], ["NaN", T0 + 45], [30, T0 + 60]],
        },
        {
            "ds_name": "a1",
            "host_name": "m48",
            "metric_name": "mem_free",
            "datapoints": [[400, T0 + 15], [410, T0 + 30]],
        },
    ],
    indent=1,
).encode()
FRAMEWORK = _lines(
    "MPI Rank 0: 10/03/2017 00:08:05: Finished Epoch[ 1 of 10]: [Training] ce = 1.66950797 * "
    "50000; errs = 61.228% * 50000",
    "MPI Rank 1: 10/03/2017 00:08:05: Finished Epoch[ 1 of 10]: [Training] ce = 1.7 * 50000",
    "2017-10-03 00:09:00,633 INFO:tensorflow:loss = 2.36026, step = 1",
    "INFO:tensorflow:global step 100: loss = 2.3",
    "[1,0]<stdout>:Epoch: [3][ 400/5005]\tTime 0.1\tLoss 3.1416e+00 (3.2071e+00)",
    "iteration       10/    1000 | elapsed time per iteration (ms): 1.0 | lm loss: 1.2E+01 |",
    "Node[0] Epoch[3] Train-cross-entropy=1.2",
    "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
)

#: Every fuzz target: a seed of each registered format (two for rrdtool_xport and job lists,
#: and the Gavel throughputs JSON as a target of its own).
SEEDS: dict[str, Seed] = {
    "philly_machine_list": Seed(
        "philly_machine_list", "cluster_machine_list", MACHINE_LIST, lines=True, header=1
    ),
    "philly_job_log": Seed("philly_job_log", "cluster_job_log", JOB_LOG),
    "philly_gpu_util": Seed("philly_gpu_util", "cluster_gpu_util", GPU_UTIL),
    "philly_cpu_util": Seed("philly_cpu_util", "cluster_cpu_util", CPU_UTIL),
    "philly_mem_util": Seed("philly_mem_util", "cluster_mem_util", MEM_UTIL),
    "job_list_csv": Seed("job_list_csv", "philly.csv", POLLUX, lines=True, header=1),
    "job_list_csv_rfold": Seed("job_list_csv", "philly_trace.csv", RFOLD, lines=True, header=1),
    "gavel_trace": Seed(
        "gavel_trace",
        "vc1.trace",
        GAVEL_TRACE,
        {"gavel_simulation_throughputs.json": GAVEL_THROUGHPUTS},
        lines=True,
    ),
    "gavel_throughputs": Seed(
        "gavel_trace",
        "gavel_simulation_throughputs.json",
        GAVEL_THROUGHPUTS,
        {"vc1.trace": GAVEL_TRACE},
    ),
    "yarn_rm_log": Seed("yarn_rm_log", "yarn-resourcemanager-rm.log", YARN),
    "hadoop_log": Seed("hadoop_log", "syslog", HADOOP_AM),
    "ganglia_xml": Seed("ganglia_xml", "gmond.xml", GMOND),
    "rrdtool_xport": Seed("rrdtool_xport", "m47/xport.xml", XPORT_XML),
    "rrdtool_xport_json": Seed("rrdtool_xport", "m47/xport.json", XPORT_JSON),
    "rrdtool_dump": Seed("rrdtool_dump", "gpu/m47/gpu0_util.xml", RRD_DUMP),
    "ganglia_csv": Seed("ganglia_csv", "m47/gpu_util.csv", GANGLIA_CSV),
    "ganglia_json": Seed("ganglia_json", "graph.json", GANGLIA_JSON),
    "framework_log": Seed(
        "framework_log", "framework/application_1_0001/attempt_0/stdout.txt", FRAMEWORK
    ),
}
